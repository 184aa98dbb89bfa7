package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// crdManifest defines crontabs.stable.example.com (the example of Kubernetes' CRD
// documentation) with a schema, status and scale subresources, printer columns, short
// names and a category; name makes the group unique to the test.
func crdManifest(group string) string {
	return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.` + group + `
spec:
  group: ` + group + `
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
    categories: [all]
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cronSpec: {type: string, description: the schedule in Cron format, pattern: '^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$'}
              image: {type: string}
              replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
          status:
            type: object
            properties:
              replicas: {type: integer}
              labelSelector: {type: string}
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.replicas
        statusReplicasPath: .status.replicas
        labelSelectorPath: .status.labelSelector
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`
}

// TestCustomResourceDefinitionWithKubectl drives a CustomResourceDefinition the way its
// documentation does, with the real kubectl: apply it, wait for Established, find it in
// api-resources and discovery, create custom resources (unknown fields refused under
// kubectl's strict validation, pruned without it; defaults applied; schema violations
// refused with their field paths), get them with the
// printer columns, scale them, apply server-side, explain their schema, and delete the
// definition: its custom resources go with it and the resource stops being served.
func TestCustomResourceDefinitionWithKubectl(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	group := "stable.e2e.example.com"
	crdName := "crontabs." + group
	if out, errOut, err := s.kubectl(t, crdManifest(group), "apply", "-f", "-"); err != nil || !strings.Contains(out, "customresourcedefinition.apiextensions.k8s.io/"+crdName+" created") {
		t.Fatalf("apply crd: %v\n%s%s", err, out, errOut)
	}
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "crd", crdName, "--ignore-not-found", "--wait=false") })
	waitEstablished(t, s, crdName)
	if got := s.must(t, "get", "crd", crdName, "-o", "jsonpath={.status.acceptedNames.kind} {.status.storedVersions} {.status.conditions[?(@.type==\"NamesAccepted\")].reason}"); got != `CronTab ["v1"] NoConflicts` {
		t.Fatalf("crd status: %q", got)
	}
	if out := s.must(t, "get", "crd", crdName); !regexp.MustCompile(`(?m)^NAME\s+CREATED AT$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(crdName)+`\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(out) {
		t.Fatalf("kubectl get crd:\n%s", out)
	}
	if out := s.must(t, "api-resources", "--api-group="+group); !regexp.MustCompile(`(?m)^crontabs\s+ct\s+` + regexp.QuoteMeta(group) + `/v1\s+true\s+CronTab$`).MatchString(out) {
		t.Fatalf("api-resources:\n%s", out)
	}

	cr := `apiVersion: ` + group + `/v1
kind: CronTab
metadata:
  name: my-cron
spec:
  cronSpec: "* * * * */5"
  image: my-awesome-cron-image
  extra: pruned
`
	// kubectl validates strictly by default: the server refuses the unknown field.
	if _, errOut, err := s.kubectl(t, cr, "apply", "-n", ns, "-f", "-"); err == nil ||
		!strings.Contains(errOut, `CronTab in version "v1" cannot be handled as a CronTab: strict decoding error: unknown field "spec.extra"`) {
		t.Fatalf("strict apply of an unknown field: %v\n%s", err, errOut)
	}
	if out, errOut, err := s.kubectl(t, cr, "apply", "--validate=false", "-n", ns, "-f", "-"); err != nil || !strings.Contains(out, "crontab."+group+"/my-cron created") {
		t.Fatalf("apply cr: %v\n%s%s", err, out, errOut)
	}
	if got := s.must(t, "get", "ct", "my-cron", "-n", ns, "-o", "jsonpath={.spec.replicas} {.spec.extra} {.metadata.generation}"); got != "1  1" {
		t.Fatalf("defaulted and pruned: %q", got)
	}
	bad := strings.Replace(strings.Replace(cr, "my-cron", "bad-cron", 1), `"* * * * */5"`, `"every minute"`, 1)
	_, errOut, err := s.kubectl(t, bad, "apply", "--validate=false", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, `spec.cronSpec: Invalid value: "every minute": spec.cronSpec in body should match`) {
		t.Fatalf("invalid cronSpec: %v\n%s", err, errOut)
	}

	out := s.must(t, "get", "crontabs", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+SPEC\s+REPLICAS\s+AGE$`).MatchString(out) || !regexp.MustCompile(`(?m)^my-cron\s+\* \* \* \* \*/5\s+1\s+\d+s$`).MatchString(out) {
		t.Fatalf("printer columns:\n%s", out)
	}
	if out := s.must(t, "get", "all", "-n", ns); !strings.Contains(out, "crontab."+group+"/my-cron") {
		t.Fatalf("category all:\n%s", out)
	}

	s.must(t, "scale", "crontab/my-cron", "-n", ns, "--replicas=3")
	if got := s.must(t, "get", "ct", "my-cron", "-n", ns, "-o", "jsonpath={.spec.replicas} {.metadata.generation}"); got != "3 2" {
		t.Fatalf("after scale: %q", got)
	}
	s.must(t, "patch", "ct", "my-cron", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"replicas":3,"labelSelector":"app=cron"},"spec":{"replicas":9}}`)
	if got := s.must(t, "get", "--raw", "/apis/"+group+"/v1/namespaces/"+ns+"/crontabs/my-cron/scale"); !strings.Contains(got, `"selector":"app=cron"`) || !strings.Contains(got, `"replicas":3`) {
		t.Fatalf("scale subresource: %s", got)
	}

	ssa := `apiVersion: ` + group + `/v1
kind: CronTab
metadata:
  name: applied
spec:
  cronSpec: "*/2 * * * *"
  image: other
`
	if out, errOut, err := s.kubectl(t, ssa, "apply", "--server-side", "-n", ns, "-f", "-"); err != nil || !strings.Contains(out, "serverside-applied") {
		t.Fatalf("server-side apply: %v\n%s%s", err, out, errOut)
	}
	if got := s.must(t, "get", "ct", "applied", "-n", ns, "-o", "jsonpath={.metadata.managedFields[0].manager} {.spec.image}"); got != "kubectl other" {
		t.Fatalf("server-side applied: %q", got)
	}

	// Deleting a namespace deletes its custom resources (the namespace controller
	// finds the resource through discovery) and then the namespace.
	ns2 := ns + "-2"
	s.must(t, "create", "namespace", ns2)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "namespace", ns2, "--ignore-not-found", "--wait=false") })
	if out, errOut, err := s.kubectl(t, strings.Replace(ssa, "applied", "in-ns2", 1), "apply", "-n", ns2, "-f", "-"); err != nil {
		t.Fatalf("apply in %s: %v\n%s%s", ns2, err, out, errOut)
	}
	s.must(t, "delete", "namespace", ns2, "--timeout=60s")

	// The schema is published: kubectl explain reads it from /openapi/v3.
	eventually(t, 30*time.Second, "kubectl explain crontabs.spec.cronSpec", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "explain", "crontabs.spec.cronSpec")
		return err == nil && strings.Contains(out, "KIND:       CronTab") && strings.Contains(out, "the schedule in Cron format"), out + errOut
	})

	// client-go's discovery reads /openapi/v2 in protobuf (as the conformance specs do).
	doc, err := s.client(t).Discovery().OpenAPISchema()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, def := range doc.GetDefinitions().GetAdditionalProperties() {
		found = found || def.GetName() == "com.example.e2e.stable.v1.CronTab"
	}
	if !found {
		t.Fatal("/openapi/v2 lacks com.example.e2e.stable.v1.CronTab")
	}

	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "crontabs"}
	dyn := dynamic.NewForConfigOrDie(s.restConfig(t)).Resource(gvr).Namespace(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := dyn.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s.must(t, "delete", "crd", crdName, "--timeout=60s")
	deleted := map[string]bool{}
	for len(deleted) < 2 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch ended before both custom resources were deleted: %v", deleted)
			}
			if ev.Type == "DELETED" {
				if m, err := meta.Accessor(ev.Object); err == nil {
					deleted[m.GetName()] = true
				}
			}
		case <-ctx.Done():
			t.Fatalf("custom resources deleted: %v", deleted)
		}
	}
	eventually(t, 30*time.Second, "crontabs no longer served", func() (bool, string) {
		_, err := dyn.List(ctx, metav1.ListOptions{})
		return apierrors.IsNotFound(err), errText(err)
	})
	if out, _, _ := s.kubectl(t, "", "api-resources", "--api-group="+group); strings.Contains(out, "crontabs") {
		t.Fatalf("api-resources after deletion:\n%s", out)
	}
	if out, _, err := s.kubectl(t, "", "explain", "crontabs"); err == nil {
		t.Fatalf("explain after deletion:\n%s", out)
	}
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestCustomResourcesServedAfterRestart restarts a server of its own and reads a custom
// resource as soon as the server is ready again: a server serves the established
// definitions in storage before it reports ready.
func TestCustomResourcesServedAfterRestart(t *testing.T) {
	s, err := startServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(); _ = os.RemoveAll(s.dataDir) })
	group := "restart.e2e.example.com"
	if out, errOut, err := s.kubectl(t, crdManifest(group), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply crd: %v\n%s%s", err, out, errOut)
	}
	waitEstablished(t, s, "crontabs."+group)
	cr := "apiVersion: " + group + "/v1\nkind: CronTab\nmetadata:\n  name: kept\n  namespace: default\nspec:\n  cronSpec: \"* * * * *\"\n"
	if out, errOut, err := s.kubectl(t, cr, "create", "-f", "-"); err != nil {
		t.Fatalf("create cr: %v\n%s%s", err, out, errOut)
	}
	s.stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	if got := s.must(t, "get", "crontabs."+group, "kept", "-n", "default", "-o", "jsonpath={.spec.cronSpec} {.spec.replicas}"); got != "* * * * * 1" {
		t.Fatalf("after restart: %q", got)
	}
}

// waitEstablished polls until the definition is Established. (kubectl wait fails at
// once, rather than waiting, while a new definition has no conditions yet: its status
// serialises conditions as null until the naming controller writes them, as upstream.)
func waitEstablished(t *testing.T, s *server, name string) {
	t.Helper()
	eventually(t, 30*time.Second, name+" Established", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "crd", name, "-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && out == "True", out + errOut
	})
}
