package e2e

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodTemplates: kubectl creates, lists (NAME CONTAINERS IMAGES POD LABELS),
// patches and deletes podtemplates; an invalid template is refused naming its field.
func TestPodTemplates(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	tpl := `apiVersion: v1
kind: PodTemplate
metadata:
  name: %s
template:
  metadata:
    labels: {app: tpl}
  spec:
    containers:
    - {name: web, image: nginx}
    - {name: side, image: busybox}
`
	c.apply(t, ns, strings.ReplaceAll(tpl, "%s", "one"))
	c.apply(t, ns, strings.ReplaceAll(tpl, "%s", "two"))
	out := s.must(t, "get", "podtemplates", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+CONTAINERS\s+IMAGES\s+POD LABELS$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^one\s+web,side\s+nginx,busybox\s+app=tpl$`).MatchString(out) {
		t.Fatalf("kubectl get podtemplates:\n%s", out)
	}
	s.must(t, "patch", "podtemplate", "one", "-n", ns, "--type=merge", "-p", `{"template":{"metadata":{"labels":{"app":"patched"}}}}`)
	if got := s.must(t, "get", "podtemplate", "one", "-n", ns, "-o", "jsonpath={.template.metadata.labels.app} {.template.spec.restartPolicy}"); got != "patched Always" {
		t.Fatalf("after patch: %q, want the new label and the defaulted restartPolicy", got)
	}
	bad := "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: bad}\ntemplate:\n  spec: {containers: []}\n"
	if _, errOut, err := s.kubectl(t, bad, "create", "-n", ns, "-f", "-"); err == nil || !strings.Contains(errOut, "template.spec.containers: Required value") {
		t.Fatalf("invalid podtemplate: err %v\n%s", err, errOut)
	}
	s.must(t, "delete", "podtemplates", "--all", "-n", ns)
	if out := s.must(t, "get", "podtemplates", "-n", ns, "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("podtemplates left after deletecollection: %q", out)
	}
}

// TestRuntimeClassAdmission: a pod naming a missing RuntimeClass is refused at create;
// one naming a runc class runs with the class's overhead and node selector.
func TestRuntimeClassAdmission(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	const class = "kinds20-runc"
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "runtimeclass", class, "--ignore-not-found") })
	c.apply(t, "", `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: `+class+`
handler: runc
overhead:
  podFixed: {cpu: 10m}
scheduling:
  nodeSelector: {kubernetes.io/os: linux}
`)
	out := s.must(t, "get", "runtimeclass", class)
	if !regexp.MustCompile(`(?m)^NAME\s+HANDLER\s+AGE$`).MatchString(out) || !regexp.MustCompile(`(?m)^`+class+`\s+runc\s+\d+s$`).MatchString(out) {
		t.Fatalf("kubectl get runtimeclass:\n%s", out)
	}
	if _, errOut, err := s.kubectl(t, "", "patch", "runtimeclass", class, "--type=merge", "-p", `{"handler":"other"}`); err == nil || !strings.Contains(errOut, "handler: Invalid value: \"other\": field is immutable") {
		t.Fatalf("handler change: err %v\n%s", err, errOut)
	}
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  runtimeClassName: %s
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
`
	missing := strings.Replace(strings.Replace(pod, "%s", "refused", 1), "%s", "no-such-class", 1)
	if _, errOut, err := s.kubectl(t, missing, "create", "-n", ns, "-f", "-"); err == nil ||
		!strings.Contains(errOut, `pods "refused" is forbidden: pod rejected: RuntimeClass "no-such-class" not found`) {
		t.Fatalf("pod with a missing RuntimeClass: err %v\n%s", err, errOut)
	}
	c.apply(t, ns, strings.Replace(strings.Replace(pod, "%s", "admitted", 1), "%s", class, 1))
	if got := s.must(t, "get", "pod", "admitted", "-n", ns, "-o", "jsonpath={.spec.overhead.cpu} {.spec.nodeSelector.kubernetes\\.io/os}"); got != "10m linux" {
		t.Fatalf("admitted pod's overhead and node selector: %q, want \"10m linux\"", got)
	}
	c.waitReady(t, ns, "admitted")

	// A class whose handler the node lacks is admitted, but the node refuses the pod's
	// sandbox as kubelet does, with an event naming the handler.
	const other = "kinds20-other"
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "runtimeclass", other, "--ignore-not-found") })
	c.apply(t, "", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata:\n  name: "+other+"\nhandler: kata\n")
	c.apply(t, ns, strings.Replace(strings.Replace(pod, "%s", "unhandled", 1), "%s", other, 1))
	eventually(t, 60*time.Second, "a FailedCreatePodSandBox event for the unknown handler", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector=involvedObject.name=unhandled,reason=FailedCreatePodSandBox", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, `Failed to create pod sandbox: failed to get sandbox runtime: no runtime for "kata" is configured`), out
	})
	if got := s.must(t, "get", "pod", "unhandled", "-n", ns, "-o", "jsonpath={.status.phase}"); got != "Pending" {
		t.Fatalf("pod with an unknown handler is %q, want Pending", got)
	}
}

// TestPodDisruptionBudget: a budget's status follows a Deployment's pods; an eviction
// it does not allow is refused with 429 and the DisruptionBudget cause, and allowed
// (spending the budget) once the Deployment has a pod to spare.
func TestPodDisruptionBudget(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: busybox, command: ["sleep", "3600"]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
spec:
  minAvailable: 2
  selector:
    matchLabels: {app: web}
`)
	status := func() string {
		out, _, _ := s.kubectl(t, "", "get", "pdb", "web", "-n", ns, "-o",
			`jsonpath={.status.expectedPods} {.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed} {.status.observedGeneration} {.status.conditions[?(@.type=="DisruptionAllowed")].reason}`)
		return out
	}
	eventually(t, 90*time.Second, "pdb status for 2 ready pods", func() (bool, string) {
		got := status()
		return got == "2 2 2 0 1 InsufficientPods", got
	})
	out := s.must(t, "get", "pdb", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+MIN AVAILABLE\s+MAX UNAVAILABLE\s+ALLOWED DISRUPTIONS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^web\s+2\s+N/A\s+0\s+\d+s$`).MatchString(out) {
		t.Fatalf("kubectl get pdb:\n%s", out)
	}

	client := s.client(t)
	ctx := context.Background()
	firstPod := func() string {
		return strings.Fields(s.must(t, "get", "pods", "-n", ns, "-l", "app=web", "--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}"))[0]
	}
	victim := firstPod()
	evict := func(name string) error {
		return client.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	err := evict(victim)
	var se apierrors.APIStatus
	if !apierrors.IsTooManyRequests(err) || !asStatus(err, &se) {
		t.Fatalf("eviction under a spent budget: %v, want 429", err)
	}
	st := se.Status()
	if st.Code != http.StatusTooManyRequests || st.Message != "Cannot evict pod as it would violate the pod's disruption budget." ||
		st.Details == nil || len(st.Details.Causes) == 0 || st.Details.Causes[0].Type != policyv1.DisruptionBudgetCause ||
		st.Details.Causes[0].Message != "The disruption budget web needs 2 healthy pods and has 2 currently" {
		t.Fatalf("refused eviction status: %+v", st)
	}

	s.must(t, "scale", "deploy", "web", "-n", ns, "--replicas=3")
	eventually(t, 90*time.Second, "pdb status for 3 ready pods", func() (bool, string) {
		got := status()
		return got == "3 3 2 1 1 SufficientPods", got
	})
	if err := evict(victim); err != nil {
		t.Fatalf("eviction the budget allows: %v", err)
	}
	// The evicted pod is terminating with the DisruptionTarget condition (the controller
	// drops it from disruptedPods once it is deleting, so that map is not checked here).
	got, errOut, err := s.kubectl(t, "", "get", "pod", victim, "-n", ns, "-o",
		`jsonpath={.status.conditions[?(@.type=="DisruptionTarget")].reason} {.metadata.deletionTimestamp}`)
	if err != nil && !strings.Contains(errOut, "NotFound") || err == nil && !regexp.MustCompile(`^EvictionByEvictionAPI \S+$`).MatchString(got) {
		t.Fatalf("evicted pod: %q %s, want it deleting with the DisruptionTarget condition (reason EvictionByEvictionAPI)", got, errOut)
	}
	eventually(t, 60*time.Second, "the evicted pod gone", func() (bool, string) {
		return podGone(t, c, ns, victim), victim
	})
	// The Deployment replaces the pod and the budget recovers.
	eventually(t, 90*time.Second, "pdb status after the replacement", func() (bool, string) {
		got := status()
		return got == "3 3 2 1 1 SufficientPods", got
	})

	// kubectl drain evicts the node's pods through the budget, retrying the refused
	// evictions until replacements elsewhere are ready.
	node := s.must(t, "get", "pod", firstPod(), "-n", ns, "-o", "jsonpath={.spec.nodeName}")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "uncordon", node) })
	out, errOut, err = s.kubectl(t, "", "drain", node, "--pod-selector=app=web", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=50s")
	if err != nil || !strings.Contains(out, "node/"+node+" drained") {
		t.Fatalf("kubectl drain %s: %v\n%s%s", node, err, out, errOut)
	}
	s.must(t, "uncordon", node)
	left := s.must(t, "get", "pods", "-n", ns, "-l", "app=web", "--field-selector=spec.nodeName="+node, "-o", "jsonpath={.items[*].metadata.name}")
	if strings.TrimSpace(left) != "" {
		t.Fatalf("pods left on the drained node %s: %s", node, left)
	}
	eventually(t, 90*time.Second, "pdb status after the drain", func() (bool, string) {
		got := status()
		return got == "3 3 2 1 1 SufficientPods", got
	})
}

// TestScaleOfCustomResource: a custom resource with a scale subresource is a
// controller like a Deployment for the disruption and HPA controllers, as in
// kube-controller-manager (which reads any kind's scale through the scale client):
// a budget over pods it controls expects its spec.replicas, and an HPA whose minimum
// is above that scales it up, which the budget then follows.
func TestScaleOfCustomResource(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	group := ns + ".example.com"
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "crd", "crontabs."+group, "--ignore-not-found", "--wait=false")
	})
	c.apply(t, "", crdManifest(group))
	waitEstablished(t, s, "crontabs."+group)
	c.apply(t, ns, "apiVersion: "+group+"/v1\nkind: CronTab\nmetadata: {name: web}\nspec: {cronSpec: \"* * * * *\", replicas: 3}\n")
	uid := s.must(t, "get", "crontabs."+group, "web", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	// Its pods, as its (absent) operator would make them: two of the three it wants.
	for _, name := range []string{"web-0", "web-1"} {
		c.apply(t, ns, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: ctweb}
  ownerReferences: [{apiVersion: %s/v1, kind: CronTab, name: web, uid: %s, controller: true}]
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox, command: ["sleep", "3600"]}
`, name, group, uid))
	}
	c.apply(t, ns, `apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: ctweb}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: ctweb}}
`)
	status := func() string {
		out, _, _ := s.kubectl(t, "", "get", "pdb", "ctweb", "-n", ns, "-o",
			`jsonpath={.status.expectedPods} {.status.currentHealthy} {.status.desiredHealthy} {.status.disruptionsAllowed} {.status.conditions[?(@.type=="DisruptionAllowed")].reason}`)
		return out
	}
	eventually(t, 90*time.Second, "the budget expecting the CronTab's 3 replicas", func() (bool, string) {
		got := status()
		return got == "3 2 2 0 InsufficientPods", got
	})

	c.apply(t, ns, `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: `+group+`/v1, kind: CronTab, name: web}
  minReplicas: 4
  maxReplicas: 5
`)
	eventually(t, 60*time.Second, "the HPA scaling the CronTab to its minimum", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "crontabs."+group, "web", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		return out == "4", out
	})
	if got := s.must(t, "get", "hpa", "web", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="AbleToScale")].status}`); got != "True" {
		t.Errorf("HPA AbleToScale %q, want True", got)
	}
	// The pods' owner changed nothing the controller watches: a pod change wakes it.
	s.must(t, "label", "pod", "web-0", "-n", ns, "touched=1")
	eventually(t, 60*time.Second, "the budget expecting the CronTab's 4 replicas", func() (bool, string) {
		got := status()
		return got == "4 2 3 0 InsufficientPods", got
	})
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	se, ok := err.(apierrors.APIStatus)
	if ok {
		*out = se
	}
	return ok
}

func podGone(t *testing.T, c *localCluster, ns, name string) bool {
	_, errOut, err := c.srv.kubectl(t, "", "get", "pod", name, "-n", ns)
	return err != nil && strings.Contains(errOut, "NotFound")
}
