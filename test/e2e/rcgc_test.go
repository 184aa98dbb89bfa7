package e2e

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

const webRC = `apiVersion: v1
kind: ReplicationController
metadata:
  name: web
spec:
  replicas: 2
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: sleeper
        image: busybox
        command: ["sleep", "3600"]
`

// TestReplicationController: `kubectl get rc` shows NAME DESIRED CURRENT READY AGE (and
// the wide columns), `kubectl scale rc` is followed by the controller, with
// SuccessfulCreate events on the ReplicationController, `kubectl describe rc` reads it
// and deleting it takes its pods along; a selector that does not match
// the template is refused with Kubernetes' field path; a pod naming a missing
// ServiceAccount is refused with the ServiceAccount admission's wording.
func TestReplicationController(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, webRC)
	c.waitRow(t, 60*time.Second, ns, "rc/web", regexp.MustCompile(`^web\s+2\s+2\s+2\s+\S+\s*$`))
	out := s.must(t, "get", "rc", "web", "-n", ns, "-o", "wide")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 ||
		!regexp.MustCompile(`^NAME\s+DESIRED\s+CURRENT\s+READY\s+AGE\s+CONTAINERS\s+IMAGES\s+SELECTOR$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^web\s+2\s+2\s+2\s+\S+\s+sleeper\s+busybox\s+app=web$`).MatchString(lines[1]) {
		t.Fatalf("kubectl get rc -o wide:\n%s", out)
	}
	if out := s.must(t, "scale", "rc", "web", "--replicas=3", "-n", ns); !strings.Contains(out, "replicationcontroller/web scaled") {
		t.Fatalf("kubectl scale: %s", out)
	}
	c.waitRow(t, 60*time.Second, ns, "rc/web", regexp.MustCompile(`^web\s+3\s+3\s+3\s`))
	out = s.must(t, "get", "pods", "-n", ns, "-l", "app=web", "-o", "jsonpath={.items[*].metadata.ownerReferences[0].kind}")
	if out != "ReplicationController ReplicationController ReplicationController" {
		t.Fatalf("owners of the pods: %q", out)
	}
	out = s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=ReplicationController,reason=SuccessfulCreate", "--no-headers")
	if n := strings.Count(out, "Created pod: web-"); n != 3 {
		t.Fatalf("want 3 SuccessfulCreate events, got %d:\n%s", n, out)
	}
	out = s.must(t, "describe", "rc", "web", "-n", ns)
	if !regexp.MustCompile(`(?m)^Replicas:\s+3 current / 3 desired$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Pods Status:\s+3 Running / 0 Waiting / 0 Succeeded / 0 Failed$`).MatchString(out) {
		t.Fatalf("kubectl describe rc:\n%s", out)
	}
	s.must(t, "delete", "rc", "web", "-n", ns)
	eventually(t, 60*time.Second, "the ReplicationController's pods collected", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=web", "--no-headers")
		return strings.TrimSpace(out) == "", out
	})

	bad := strings.Replace(strings.Replace(webRC, "name: web", "name: bad", 1), "  replicas: 2\n", "  replicas: 2\n  selector: {app: other}\n", 1)
	_, errOut, err := s.kubectl(t, bad, "apply", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, "spec.template.metadata.labels: Invalid value: {\"app\":\"web\"}: `selector` does not match template `labels`") {
		t.Fatalf("mismatched selector: err %v\n%s", err, errOut)
	}

	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lost\nspec:\n  serviceAccountName: missing\n  containers:\n  - name: c\n    image: busybox\n"
	_, errOut, err = s.kubectl(t, pod, "apply", "-n", ns, "-f", "-")
	want := fmt.Sprintf(`pods "lost" is forbidden: error looking up service account %s/missing: serviceaccount "missing" not found`, ns)
	if err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("pod with a missing service account: err %v\n%s\nwant %s", err, errOut, want)
	}
}

// TestPodGCAfterNodeRemoval: the pods of a StatefulSet and a Deployment on a node that
// `tranche node remove` took away are deleted by the pod garbage collector and
// recreated on another node. The workloads select nodes by a label that only the doomed
// node has at first and a shared node gets once they run there.
func TestPodGCAfterNodeRemoval(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	const doomed = "gcnode"
	if out, err := exec.Command(trancheBin, "node", "add", doomed, "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("node add: %v\n%s", err, out)
	}
	removed := false
	t.Cleanup(func() {
		if !removed {
			_, _ = exec.Command(trancheBin, "node", "remove", doomed, "--data-dir", c.dataDir).CombinedOutput()
		}
	})
	eventually(t, 30*time.Second, "node "+doomed+" Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "node", doomed, "--no-headers")
		return regexp.MustCompile(`^` + doomed + `\s+Ready\s`).MatchString(out), out
	})
	label := "rcgc-" + ns
	s.must(t, "label", "node", doomed, label+"=yes")
	workloads := fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: keeper
spec:
  serviceName: keeper
  replicas: 1
  selector:
    matchLabels: {app: keeper}
  template:
    metadata:
      labels: {app: keeper}
    spec:
      nodeSelector: {%[1]s: "yes"}
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        command: ["sleep", "3600"]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: mover
spec:
  replicas: 1
  selector:
    matchLabels: {app: mover}
  template:
    metadata:
      labels: {app: mover}
    spec:
      nodeSelector: {%[1]s: "yes"}
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: busybox
        command: ["sleep", "3600"]
`, label)
	c.apply(t, ns, workloads)
	c.waitReady(t, ns, "keeper-0")
	eventually(t, 60*time.Second, "the Deployment's pod Running on "+doomed, func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=mover", "-o", "jsonpath={.items[*].status.phase} {.items[*].spec.nodeName}")
		return out == "Running "+doomed, out
	})
	keeperUID := s.must(t, "get", "pod", "keeper-0", "-n", ns, "-o", "jsonpath={.metadata.uid}")
	if node := s.must(t, "get", "pod", "keeper-0", "-n", ns, "-o", "jsonpath={.spec.nodeName}"); node != doomed {
		t.Fatalf("keeper-0 on %q, want %s", node, doomed)
	}
	other := ""
	for _, n := range strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}")) {
		if n != doomed {
			other = n
			break
		}
	}
	s.must(t, "label", "node", other, label+"=yes")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "label", "node", other, label+"-") })

	if out, err := exec.Command(trancheBin, "node", "remove", doomed, "--data-dir", c.dataDir).CombinedOutput(); err != nil {
		t.Fatalf("node remove: %v\n%s", err, out)
	}
	removed = true
	eventually(t, 60*time.Second, "keeper-0 recreated Running on "+other, func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "keeper-0", "-n", ns, "-o", "jsonpath={.metadata.uid} {.status.phase} {.spec.nodeName}")
		f := strings.Fields(out)
		return len(f) == 3 && f[0] != keeperUID && f[1] == "Running" && f[2] == other, out
	})
	eventually(t, 60*time.Second, "the Deployment's pod alone and Running on "+other, func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=mover", "-o", "jsonpath={.items[*].status.phase} {.items[*].spec.nodeName}")
		return out == "Running "+other, out
	})
}
