package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// admissionWebhookPod runs upstream's agnhost `webhook` (the conformance specs' sample
// webhook) with a certificate for its Service, as test/e2e/apimachinery/webhook.go does.
const admissionWebhookPod = `apiVersion: v1
kind: Pod
metadata:
  name: sample-webhook
  labels: {app: sample-webhook}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: sample-webhook
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["webhook", "--tls-cert-file=/webhook.local.config/certificates/tls.crt",
      "--tls-private-key-file=/webhook.local.config/certificates/tls.key", "-v=4", "--port=8444"]
    ports: [{containerPort: 8444}]
    readinessProbe:
      httpGet: {scheme: HTTPS, port: 8444, path: /readyz}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /webhook.local.config/certificates, readOnly: true}]
  volumes:
  - name: certs
    secret: {secretName: webhook-certs}
---
apiVersion: v1
kind: Service
metadata:
  name: e2e-test-webhook
spec:
  selector: {app: sample-webhook}
  ports: [{port: 8443, targetPort: 8444}]
`

// webhookConfig is a webhook configuration of kind (Validating or Mutating) whose
// webhooks call the given paths of the sample webhook's Service (or of serviceName),
// only for configmaps of namespace ns.
func webhookConfig(kind, name, ns, serviceName, caBundle, failurePolicy string, paths ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: admissionregistration.k8s.io/v1\nkind: %sWebhookConfiguration\nmetadata: {name: %s}\nwebhooks:\n", kind, name)
	for i, path := range paths {
		fmt.Fprintf(&b, `- name: step-%d.%s.k8s.io
  clientConfig:
    service: {namespace: %s, name: %s, path: %s, port: 8443}
    caBundle: %s
  rules: [{operations: [CREATE, UPDATE, DELETE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]
  namespaceSelector: {matchLabels: {webhook-e2e: %s}}
  failurePolicy: %s
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
`, i+1, name, ns, serviceName, path, caBundle, ns, failurePolicy)
	}
	return b.String()
}

// TestAdmissionWebhooks: the conformance specs' sample webhook, in a pod behind its
// Service, denies a ConfigMap's creation, update and deletion with upstream's wording,
// two mutating webhooks patch one
// in order, and a webhook whose Service has no endpoints fails the request under
// failurePolicy Fail and is skipped under Ignore. Configurations are cluster-wide: each
// selects only this test's namespace and is deleted when the test ends.
func TestAdmissionWebhooks(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	s.must(t, "label", "namespace", ns, "webhook-e2e="+ns)
	dir := t.TempDir()
	caFile := writeTestCertificates(t, dir, "e2e-test-webhook."+ns+".svc")
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)
	s.must(t, "create", "secret", "tls", "webhook-certs", "-n", ns,
		"--cert="+filepath.Join(dir, "tls.crt"), "--key="+filepath.Join(dir, "tls.key"))
	c.apply(t, ns, admissionWebhookPod)
	c.waitReady(t, ns, "sample-webhook")

	apply := func(manifest, kind, name string) {
		t.Helper()
		t.Cleanup(func() {
			_, _, _ = s.kubectl(t, "", "delete", strings.ToLower(kind)+"webhookconfiguration", name, "--ignore-not-found")
		})
		c.apply(t, "", manifest)
	}
	configMap := func(name string, data ...string) string {
		m := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata:\n"
		for i := 0; i+1 < len(data); i += 2 {
			m += fmt.Sprintf("  %s: %q\n", data[i], data[i+1])
		}
		return m
	}

	t.Run("deny", func(t *testing.T) {
		apply(webhookConfig("Validating", "deny-"+ns, ns, "e2e-test-webhook", caBundle, "Fail", "/configmaps"), "Validating", "deny-"+ns)
		want := `admission webhook "step-1.deny-` + ns + `.k8s.io" denied the request: the configmap contains unwanted key and value`
		i := 0
		eventually(t, 30*time.Second, "a disallowed ConfigMap denied", func() (bool, string) {
			i++
			_, errOut, err := s.kubectl(t, configMap(fmt.Sprintf("disallowed-%d", i), "webhook-e2e-test", "webhook-disallow"), "create", "-n", ns, "-f", "-")
			return err != nil && strings.Contains(errOut, want), errOut
		})
		s.must(t, "create", "configmap", "allowed", "-n", ns, "--from-literal=webhook-e2e-test=webhook-allow")
		// An update that adds the disallowed pair is denied too.
		_, errOut, err := s.kubectl(t, "", "patch", "configmap", "allowed", "-n", ns, "-p", `{"data":{"webhook-e2e-test":"webhook-disallow"}}`)
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("update: err %v, %s\nwant %s", err, errOut, want)
		}
		// So is the deletion of a ConfigMap the webhook keeps, also as a dry run.
		s.must(t, "create", "configmap", "kept", "-n", ns, "--from-literal=webhook-e2e-test=webhook-nondeletable")
		wantDelete := `admission webhook "step-1.deny-` + ns + `.k8s.io" denied the request: the configmap cannot be deleted because it contains unwanted key and value`
		for _, dry := range []string{"--dry-run=server", "--dry-run=none"} {
			if _, errOut, err := s.kubectl(t, "", "delete", "configmap", "kept", "-n", ns, dry); err == nil || !strings.Contains(errOut, wantDelete) {
				t.Fatalf("delete %s: err %v, %s\nwant %s", dry, err, errOut, wantDelete)
			}
		}
		s.must(t, "get", "configmap", "kept", "-n", ns)
		s.must(t, "delete", "validatingwebhookconfiguration", "deny-"+ns)
		eventually(t, 30*time.Second, "a disallowed ConfigMap allowed after the configuration's deletion", func() (bool, string) {
			i++
			out, errOut, err := s.kubectl(t, configMap(fmt.Sprintf("disallowed-%d", i), "webhook-e2e-test", "webhook-disallow"), "create", "-n", ns, "-f", "-")
			return err == nil, out + errOut
		})
	})

	t.Run("mutate", func(t *testing.T) {
		apply(webhookConfig("Mutating", "mutate-"+ns, ns, "e2e-test-webhook", caBundle, "Fail", "/mutating-configmaps", "/mutating-configmaps"), "Mutating", "mutate-"+ns)
		i := 0
		eventually(t, 30*time.Second, "a ConfigMap mutated by both webhooks", func() (bool, string) {
			i++
			name := fmt.Sprintf("mutated-%d", i)
			if _, errOut, err := s.kubectl(t, configMap(name, "mutation-start", "yes"), "create", "-n", ns, "-f", "-"); err != nil {
				return false, errOut
			}
			out := s.must(t, "get", "configmap", name, "-n", ns, "-o", "jsonpath={.data}")
			return strings.Contains(out, `"mutation-stage-1":"yes"`) && strings.Contains(out, `"mutation-stage-2":"yes"`), out
		})
		// A dry run is mutated as well, and nothing is stored.
		out := s.must(t, "create", "configmap", "dry", "-n", ns, "--from-literal=mutation-start=yes", "--dry-run=server", "-o", "jsonpath={.data}")
		if !strings.Contains(out, `"mutation-stage-2":"yes"`) {
			t.Errorf("dry run not mutated: %s", out)
		}
	})

	t.Run("attach", func(t *testing.T) {
		c.apply(t, ns, `apiVersion: v1
kind: Pod
metadata: {name: to-be-attached-pod}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: container1, image: busybox, command: [sleep, "3600"], stdin: true}
`)
		c.waitReady(t, ns, "to-be-attached-pod")
		name := "attach-" + ns
		apply(fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %[1]s}
webhooks:
- name: deny-attaching-pod.%[1]s.k8s.io
  clientConfig:
    service: {namespace: %[2]s, name: e2e-test-webhook, path: /pods/attach, port: 8443}
    caBundle: %[3]s
  rules: [{operations: [CONNECT], apiGroups: [""], apiVersions: [v1], resources: [pods/attach]}]
  namespaceSelector: {matchLabels: {webhook-e2e: %[2]s}}
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 5
`, name, ns, caBundle), "Validating", name)
		want := "attaching to pod 'to-be-attached-pod' is not allowed"
		eventually(t, 30*time.Second, "kubectl attach denied", func() (bool, string) {
			_, errOut, err := s.kubectl(t, "", "attach", "to-be-attached-pod", "-n", ns, "-i", "-c", "container1")
			return err != nil && strings.Contains(errOut, want), errOut
		})
	})

	t.Run("unreachable", func(t *testing.T) {
		s.must(t, "create", "service", "clusterip", "no-endpoints", "-n", ns, "--tcp=8443:8444")
		apply(webhookConfig("Validating", "ignore-"+ns, ns, "no-endpoints", caBundle, "Ignore", "/configmaps"), "Validating", "ignore-"+ns)
		s.must(t, "create", "configmap", "ignored", "-n", ns)
		apply(webhookConfig("Validating", "fail-"+ns, ns, "no-endpoints", caBundle, "Fail", "/configmaps"), "Validating", "fail-"+ns)
		want := `Internal error occurred: failed calling webhook "step-1.fail-` + ns + `.k8s.io"`
		i := 0
		eventually(t, 30*time.Second, "a ConfigMap refused by the unreachable webhook", func() (bool, string) {
			i++
			_, errOut, err := s.kubectl(t, "", "create", "configmap", fmt.Sprintf("refused-%d", i), "-n", ns)
			return err != nil && strings.Contains(errOut, want), errOut
		})
	})
}

// vapManifest is upstream's "should validate against a Deployment" policy, bound to one
// namespace, with a second policy that confuses types for the type checker.
func vapManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas.%[1]s}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
    resourceRules: [{operations: [CREATE, UPDATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
  variables: [{name: replicas, expression: object.spec.replicas}]
  validations:
  - expression: variables.replicas > 1
    messageExpression: "'wants replicas > 1, got ' + string(object.spec.replicas)"
  - expression: namespaceObject.metadata.name == '%[1]s'
    message: other namespace
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas.%[1]s}
spec:
  policyName: replicas.%[1]s
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: confused.%[1]s}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
    resourceRules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
  validations:
  - expression: object.spec.replicas > '1'
`, ns)
}

// TestValidatingAdmissionPolicy: a policy and its binding deny a one-replica Deployment
// with the policy's message (422 Invalid, as upstream's spec expects), allow a
// two-replica one and leave ReplicaSets alone; kubectl prints the policy's table; the
// status controller type-checks both policies, warning about the confused one.
func TestValidatingAdmissionPolicy(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "validatingadmissionpolicybinding", "replicas."+ns, "--ignore-not-found")
		_, _, _ = s.kubectl(t, "", "delete", "validatingadmissionpolicy", "replicas."+ns, "confused."+ns, "--ignore-not-found")
	})
	c.apply(t, "", vapManifest(ns))
	want := `deployments.apps "single" is forbidden: ValidatingAdmissionPolicy 'replicas.` + ns + `' with binding 'replicas.` + ns +
		`' denied request: wants replicas > 1, got 1`
	deployments := s.client(t).AppsV1().Deployments(ns)
	single := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "single"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "single"}},
		Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "single"}},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}},
	}}
	eventually(t, 30*time.Second, "a one-replica Deployment denied as Invalid", func() (bool, string) {
		_, err := deployments.Create(context.Background(), single, metav1.CreateOptions{})
		if err == nil {
			_ = deployments.Delete(context.Background(), "single", metav1.DeleteOptions{})
			return false, "created"
		}
		return apierrors.IsInvalid(err) && err.Error() == want, fmt.Sprintf("%v (reason %s)", err, apierrors.ReasonForError(err))
	})
	s.must(t, "create", "deployment", "replicated", "-n", ns, "--image=busybox", "--replicas=2", "--dry-run=server")
	if out := s.must(t, "get", "validatingadmissionpolicy", "replicas."+ns); !strings.Contains(out, "replicas."+ns+"   2             <unset>") {
		t.Errorf("table:\n%s", out)
	}
	// The status subresource takes conditions (as upstream's API operations spec writes
	// them); a spec write bumps the generation and keeps the status.
	s.must(t, "patch", "validatingadmissionpolicy", "replicas."+ns, "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"PatchStatusFailed","status":"False","reason":"e2e","message":"set by a test","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}`)
	s.must(t, "patch", "validatingadmissionpolicy", "replicas."+ns, "--type=merge", "-p", `{"spec":{"failurePolicy":"Ignore"}}`)
	if got := s.must(t, "get", "validatingadmissionpolicy", "replicas."+ns, "-o",
		`jsonpath={.metadata.generation} {.spec.failurePolicy} {.status.conditions[0].type}`); got != "2 Ignore PatchStatusFailed" {
		t.Errorf("after status and spec patches: %q", got)
	}
	_, errOut, err := s.kubectl(t, "", "patch", "validatingadmissionpolicy", "replicas."+ns, "--subresource=status", "--type=merge", "-p",
		`{"status":{"conditions":[{"type":"Bad","status":"Maybe","reason":"e2e","message":"m","lastTransitionTime":"2024-01-01T00:00:00Z"}]}}`)
	if err == nil || !strings.Contains(errOut, `status.conditions[0].status: Unsupported value: "Maybe"`) {
		t.Errorf("bad condition: err %v, %s", err, errOut)
	}
	eventually(t, 30*time.Second, "type checking of both policies", func() (bool, string) {
		good := s.must(t, "get", "validatingadmissionpolicy", "replicas."+ns, "-o", "jsonpath={.status.typeChecking}")
		bad := s.must(t, "get", "validatingadmissionpolicy", "confused."+ns, "-o", "jsonpath={.status.typeChecking.expressionWarnings[0]}")
		return good == "{}" && strings.Contains(bad, `"fieldRef":"spec.validations[0].expression"`) &&
			strings.Contains(bad, "found no matching overload for '_\\u003e_' applied to '(int, string)'"), good + " " + bad
	})
}

// mapManifest is upstream's "should mutate a Deployment with annotations" policy (an
// apply configuration) plus a JSON patch that sets the replicas, bound to one namespace.
func mapManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: annotate.%[1]s}
spec:
  matchConstraints:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: %[1]s}}
    resourceRules: [{operations: [CREATE], apiGroups: [apps], apiVersions: [v1], resources: [deployments]}]
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{annotations: {"mutated-by": "admission-policy"}}}'
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "replace", path: "/spec/replicas", value: 3}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: annotate.%[1]s}
spec:
  policyName: annotate.%[1]s
`, ns)
}

// TestMutatingAdmissionPolicy: a MutatingAdmissionPolicy's apply configuration and JSON
// patch both change a Deployment created in its namespace, and kubectl prints its table.
func TestMutatingAdmissionPolicy(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "mutatingadmissionpolicybinding", "annotate."+ns, "--ignore-not-found")
		_, _, _ = s.kubectl(t, "", "delete", "mutatingadmissionpolicy", "annotate."+ns, "--ignore-not-found")
	})
	c.apply(t, "", mapManifest(ns))
	i := 0
	eventually(t, 30*time.Second, "a Deployment mutated by the policy", func() (bool, string) {
		i++
		name := fmt.Sprintf("marker-%d", i)
		out, errOut, err := s.kubectl(t, "", "create", "deployment", name, "-n", ns, "--image=busybox", "--replicas=1",
			"-o", `jsonpath={.metadata.annotations.mutated-by} {.spec.replicas}`)
		if err != nil {
			return false, errOut
		}
		return out == "admission-policy 3", out
	})
	if out := s.must(t, "get", "mutatingadmissionpolicy", "annotate."+ns); !strings.Contains(out, "annotate."+ns+"   2           <unset>") {
		t.Errorf("table:\n%s", out)
	}
}

// TestAdmissionRegistrationKinds: the group's six kinds are discovered and explained,
// a webhook configuration gets upstream's defaults and table, and a bad one is refused
// with a Status naming the field.
func TestAdmissionRegistrationKinds(t *testing.T) {
	s := up(t).srv
	ns := s.namespace(t)
	out := s.must(t, "api-resources", "--api-group=admissionregistration.k8s.io", "-o", "name")
	for _, r := range []string{"mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "mutatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations"} {
		if !strings.Contains(out, r+".admissionregistration.k8s.io\n") {
			t.Errorf("discovery lacks %s:\n%s", r, out)
		}
	}
	if out := s.must(t, "explain", "validatingwebhookconfiguration.webhooks.failurePolicy"); !strings.Contains(out, "failurePolicy defines how unrecognized errors") {
		t.Errorf("explain:\n%s", out)
	}
	name := "defaults-" + ns
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "validatingwebhookconfiguration", name, "--ignore-not-found")
	})
	manifest := fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: %s}
webhooks:
- name: defaults.example.com
  clientConfig: {service: {namespace: %s, name: nowhere}}
  rules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [podtemplates]}]
  namespaceSelector: {matchLabels: {webhook-e2e: %s}}
  sideEffects: None
  admissionReviewVersions: [v1]
`, name, ns, ns)
	if out, errOut, err := s.kubectl(t, manifest, "create", "-f", "-"); err != nil {
		t.Fatalf("create: %v\n%s%s", err, out, errOut)
	}
	got := s.must(t, "get", "validatingwebhookconfiguration", name, "-o",
		`jsonpath={.webhooks[0].failurePolicy} {.webhooks[0].matchPolicy} {.webhooks[0].timeoutSeconds} {.webhooks[0].clientConfig.service.port} {.webhooks[0].objectSelector} {.webhooks[0].rules[0].scope} {.metadata.generation}`)
	if want := "Fail Equivalent 10 443 {} * 1"; got != want {
		t.Errorf("defaults: %q, want %q", got, want)
	}
	if out := s.must(t, "get", "validatingwebhookconfiguration", name, "--no-headers"); !strings.HasPrefix(out, name+"   1   ") {
		t.Errorf("table row: %q", out)
	}
	bad := strings.Replace(manifest, "name: defaults.example.com", "name: defaults", 1)
	bad = strings.Replace(bad, "name: "+name, "name: bad-"+ns, 1)
	_, errOut, err := s.kubectl(t, bad, "create", "-f", "-")
	want := `The ValidatingWebhookConfiguration "bad-` + ns + `" is invalid: webhooks[0].name: Invalid value: "defaults": should be a domain with at least three segments separated by dots`
	if err == nil || !strings.Contains(errOut, want) {
		t.Errorf("bad name: err %v, %s\nwant %s", err, errOut, want)
	}
}
