package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubectlWorkflow drives the real kubectl through the everyday verbs on the seed
// manifests (000: Deployment api + Service api-svc).
func TestKubectlWorkflow(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	out := s.must(t, "apply", "-n", ns, "-f", "testdata/000-api.yaml")
	for _, want := range []string{"deployment.apps/api created", "service/api-svc created"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, out)
		}
	}
	// A second apply is a no-op that kubectl reports as unchanged.
	if out := s.must(t, "apply", "-n", ns, "-f", "testdata/000-api.yaml"); !strings.Contains(out, "deployment.apps/api unchanged") {
		t.Fatalf("re-apply: %s", out)
	}

	t.Run("get tables", func(t *testing.T) {
		out := s.must(t, "get", "svc", "api-svc", "-n", ns)
		if !regexp.MustCompile(`(?m)^NAME\s+TYPE\s+CLUSTER-IP\s+EXTERNAL-IP\s+PORT\(S\)\s+AGE$`).MatchString(out) {
			t.Fatalf("service table header:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)^api-svc\s+ClusterIP\s+\S+\s+<none>\s+80/TCP\s+\d+s$`).MatchString(out) {
			t.Fatalf("service row:\n%s", out)
		}
		out = s.must(t, "get", "svc", "-n", ns, "-o", "wide")
		if !strings.Contains(out, "SELECTOR") || !strings.Contains(out, "app=api") {
			t.Fatalf("-o wide:\n%s", out)
		}
		out = s.must(t, "get", "deploy", "-n", ns)
		if !regexp.MustCompile(`(?m)^NAME\s+READY\s+UP-TO-DATE\s+AVAILABLE\s+AGE$`).MatchString(out) || !strings.Contains(out, "api") {
			t.Fatalf("deployment table:\n%s", out)
		}
		out = s.must(t, "get", "namespaces")
		if !regexp.MustCompile(`(?m)^kube-system\s+Active\s+`).MatchString(out) {
			t.Fatalf("namespaces:\n%s", out)
		}
	})

	t.Run("output formats", func(t *testing.T) {
		y := s.must(t, "get", "deploy", "api", "-n", ns, "-o", "yaml")
		for _, want := range []string{"apiVersion: apps/v1", "kind: Deployment", "replicas: 3", "uid:", "resourceVersion:", "kubectl.kubernetes.io/last-applied-configuration"} {
			if !strings.Contains(y, want) {
				t.Fatalf("-o yaml lacks %q:\n%s", want, y)
			}
		}
		var obj map[string]interface{}
		if err := json.Unmarshal([]byte(s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "json")), &obj); err != nil {
			t.Fatal(err)
		}
		if got := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.ports[0].targetPort}"); got != "8080" {
			t.Fatalf("jsonpath targetPort = %q", got)
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := s.must(t, "describe", "svc", "api-svc", "-n", ns)
		for _, want := range []string{"Name:", "api-svc", "Selector:", "app=api", "TargetPort:", "8080/TCP"} {
			if !strings.Contains(out, want) {
				t.Fatalf("describe lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("label annotate scale", func(t *testing.T) {
		s.must(t, "label", "deploy", "api", "-n", ns, "tier=backend")
		s.must(t, "annotate", "deploy", "api", "-n", ns, "owner=team-a")
		s.must(t, "scale", "deploy", "api", "-n", ns, "--replicas=5")
		got := s.must(t, "get", "deploy", "api", "-n", ns, "-o", "jsonpath={.metadata.labels.tier} {.metadata.annotations.owner} {.spec.replicas} {.metadata.generation}")
		if got != "backend team-a 5 2" {
			t.Fatalf("after label/annotate/scale: %q (want \"backend team-a 5 2\")", got)
		}
		if out := s.must(t, "get", "deploy", "-n", ns, "-l", "tier=backend", "-o", "name"); strings.TrimSpace(out) != "deployment.apps/api" {
			t.Fatalf("label selector: %q", out)
		}
	})

	t.Run("patch kinds", func(t *testing.T) {
		s.must(t, "patch", "svc", "api-svc", "-n", ns, "--type=strategic", "-p", `{"spec":{"ports":[{"port":80,"name":"web"}]}}`)
		s.must(t, "patch", "svc", "api-svc", "-n", ns, "--type=merge", "-p", `{"metadata":{"labels":{"patched":"merge"}}}`)
		s.must(t, "patch", "svc", "api-svc", "-n", ns, "--type=json", "-p", `[{"op":"add","path":"/metadata/annotations/j","value":"json"}]`)
		got := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.ports[0].name} {.spec.ports[0].targetPort} {.metadata.labels.patched} {.metadata.annotations.j}")
		if got != "web 8080 merge json" {
			t.Fatalf("after patches: %q", got)
		}
	})

	t.Run("edit", func(t *testing.T) {
		dir := t.TempDir()
		editor := filepath.Join(dir, "editor.sh")
		script := "#!/bin/sh\nsed -i 's/tier: backend/tier: edited/' \"$1\"\n"
		if err := os.WriteFile(editor, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBE_EDITOR", editor)
		s.must(t, "edit", "deploy", "api", "-n", ns)
		if got := s.must(t, "get", "deploy", "api", "-n", ns, "-o", "jsonpath={.metadata.labels.tier}"); got != "edited" {
			t.Fatalf("after edit: tier=%q", got)
		}
	})

	t.Run("explain and discovery", func(t *testing.T) {
		out := s.must(t, "explain", "service.spec.ports")
		for _, want := range []string{"KIND:", "Service", "FIELD: ports", "targetPort", "nodePort"} {
			if !strings.Contains(out, want) {
				t.Fatalf("explain lacks %q:\n%s", want, out)
			}
		}
		out = s.must(t, "api-resources")
		for _, re := range []string{`(?m)^services\s+svc\s+v1\s+true\s+Service$`, `(?m)^deployments\s+deploy\s+apps/v1\s+true\s+Deployment$`, `(?m)^endpointslices\s+discovery.k8s.io/v1\s+true\s+EndpointSlice$`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Fatalf("api-resources lacks %s:\n%s", re, out)
			}
		}
		out = s.must(t, "api-versions")
		for _, want := range []string{"v1\n", "apps/v1\n", "batch/v1\n", "rbac.authorization.k8s.io/v1\n"} {
			if !strings.Contains(out, want) {
				t.Fatalf("api-versions lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("dry run", func(t *testing.T) {
		out := s.must(t, "create", "configmap", "dry", "-n", ns, "--from-literal=a=b", "--dry-run=server", "-o", "jsonpath={.metadata.name}")
		if out != "dry" {
			t.Fatalf("dry run output %q", out)
		}
		if _, _, err := s.kubectl(t, "", "get", "configmap", "dry", "-n", ns); err == nil {
			t.Fatal("a server dry run must not store the object")
		}
	})

	t.Run("watch sees a change", func(t *testing.T) {
		s.must(t, "create", "configmap", "watched", "-n", ns, "--from-literal=a=1")
		go func() {
			time.Sleep(1500 * time.Millisecond)
			_, _, _ = s.kubectl(t, "", "label", "configmap", "watched", "-n", ns, "seen=yes")
		}()
		out, _, _ := s.kubectl(t, "", "get", "configmap", "watched", "-n", ns, "-w", "--show-labels", "--request-timeout=5s")
		if !regexp.MustCompile(`(?m)^watched\s+1\s+\S+\s+seen=yes$`).MatchString(out) {
			t.Fatalf("watch output:\n%s", out)
		}
	})
}

// TestInvalidServiceIsRefused checks that kubectl reports the field path of a bad port.
func TestInvalidServiceIsRefused(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	bad := `apiVersion: v1
kind: Service
metadata:
  name: bad
spec:
  selector: {app: x}
  ports:
  - port: 0
`
	_, errOut, err := s.kubectl(t, bad, "apply", "-n", ns, "-f", "-")
	if err == nil {
		t.Fatal("kubectl apply of an invalid Service succeeded")
	}
	if !strings.Contains(errOut, "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive") {
		t.Fatalf("error lacks the field path:\n%s", errOut)
	}
	unknown := strings.Replace(bad, "port: 0", "port: 80\n    colour: blue", 1)
	_, errOut, err = s.kubectl(t, unknown, "apply", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, `unknown field "spec.ports[0].colour"`) {
		t.Fatalf("unknown field: err=%v\n%s", err, errOut)
	}
	if _, _, err := s.kubectl(t, "", "get", "svc", "bad", "-n", ns); err == nil {
		t.Fatal("an invalid Service was stored")
	}
}

// TestDeleteCascade checks the three propagation modes on a Deployment's ReplicaSet
// stand-in: a ConfigMap owned by another ConfigMap.
func TestDeleteCascade(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	for _, mode := range []string{"background", "foreground", "orphan"} {
		owner := "owner-" + mode
		s.must(t, "create", "configmap", owner, "-n", ns)
		uid := s.must(t, "get", "configmap", owner, "-n", ns, "-o", "jsonpath={.metadata.uid}")
		dep := `apiVersion: v1
kind: ConfigMap
metadata:
  name: dep-` + mode + `
  ownerReferences:
  - apiVersion: v1
    kind: ConfigMap
    name: ` + owner + `
    uid: ` + uid + `
    blockOwnerDeletion: true
`
		if _, errOut, err := s.kubectl(t, dep, "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("dependent: %v %s", err, errOut)
		}
		s.must(t, "delete", "configmap", owner, "-n", ns, "--cascade="+mode)
		switch mode {
		case "orphan":
			eventually(t, 20*time.Second, "orphaned dependent loses its ownerReference", func() (bool, string) {
				out, _, err := s.kubectl(t, "", "get", "configmap", "dep-"+mode, "-n", ns, "-o", "jsonpath={.metadata.ownerReferences}")
				return err == nil && out == "", out
			})
		default:
			eventually(t, 20*time.Second, mode+" deletes the dependent", func() (bool, string) {
				_, errOut, err := s.kubectl(t, "", "get", "configmap", "dep-"+mode, "-n", ns)
				return err != nil && strings.Contains(errOut, "NotFound"), errOut
			})
		}
		eventually(t, 20*time.Second, mode+" removes the owner", func() (bool, string) {
			_, errOut, err := s.kubectl(t, "", "get", "configmap", owner, "-n", ns)
			return err != nil, errOut
		})
	}
}

// TestNamespaceDeletionEmptiesIt: deleting a namespace deletes its content first, then
// the namespace (namespace controller, finalizer kubernetes).
func TestNamespaceDeletionEmptiesIt(t *testing.T) {
	s := shared
	ns := "e2e-ns-deletion"
	s.must(t, "create", "namespace", ns)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false") })
	s.must(t, "create", "configmap", "a", "-n", ns)
	s.must(t, "create", "serviceaccount", "robot", "-n", ns)
	if out := s.must(t, "get", "namespace", ns, "-o", "jsonpath={.spec.finalizers}"); out != `["kubernetes"]` {
		t.Fatalf("spec.finalizers = %s", out)
	}
	eventually(t, 20*time.Second, "default service account created", func() (bool, string) {
		_, errOut, err := s.kubectl(t, "", "get", "serviceaccount", "default", "-n", ns)
		return err == nil, errOut
	})
	s.must(t, "delete", "namespace", ns, "--wait=false")
	eventually(t, 30*time.Second, "namespace gone", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "namespace", ns, "-o", "jsonpath={.status.phase}")
		return err != nil && strings.Contains(errOut, "NotFound"), out + errOut
	})
}
