package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sched20Class returns a PriorityClass manifest.
func sched20Class(name string, value int, extra string) string {
	return fmt.Sprintf("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: %s}\nvalue: %d\n%s", name, value, extra)
}

// sched20Pod returns a pause pod manifest pinned to node (none when empty) with the
// given priority class and requests of the extended resource sched20Slot.
func sched20Pod(name, class, node string, slots int, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\n%s", name, extra)
	b.WriteString("spec:\n  terminationGracePeriodSeconds: 1\n")
	if class != "" {
		fmt.Fprintf(&b, "  priorityClassName: %s\n", class)
	}
	if node != "" {
		fmt.Fprintf(&b, "  nodeSelector: {kubernetes.io/hostname: %s}\n", node)
	}
	b.WriteString("  containers:\n  - name: c\n    image: registry.k8s.io/pause:3.10\n")
	if slots > 0 {
		fmt.Fprintf(&b, "    resources: {requests: {%s: %d}, limits: {%s: %d}}\n", sched20Slot, slots, sched20Slot, slots)
	}
	return b.String()
}

// sched20Slot is the extended resource the preemption test advertises on one node.
const sched20Slot = "sched20.tranche.dev/slot"

// TestSched20PriorityClasses: the system classes exist and cannot be deleted; user
// classes are validated as kube-apiserver does (reserved prefix, highest user value,
// immutable value, one globalDefault); the Priority admission gives pods their class's
// value and policy, or the default class's, and refuses an unknown class.
func TestSched20PriorityClasses(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	classes := []string{"sched20-high", "sched20-quiet", "sched20-default"}
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", append([]string{"delete", "priorityclass", "--ignore-not-found"}, classes...)...)
	})

	out := s.must(t, "get", "pc")
	if !regexp.MustCompile(`(?m)^NAME\s+VALUE\s+GLOBAL-DEFAULT\s+AGE\s+PREEMPTIONPOLICY$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^system-cluster-critical\s+2000000000\s+false\s+\S+\s+PreemptLowerPriority$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^system-node-critical\s+2000001000\s+false\s+\S+\s+PreemptLowerPriority$`).MatchString(out) {
		t.Fatalf("kubectl get pc:\n%s", out)
	}
	refused := func(what, stdin, want string, args ...string) {
		t.Helper()
		if _, errOut, err := s.kubectl(t, stdin, args...); err == nil || !strings.Contains(errOut, want) {
			t.Errorf("%s: err %v, stderr %q, want %q", what, err, errOut, want)
		}
	}
	refused("deleting a system class", "", `priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a system priority class and cannot be deleted`,
		"delete", "priorityclass", "system-node-critical")
	refused("a reserved name", sched20Class("system-sched20", 5, ""),
		"metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-sched20 is not a known system priority class",
		"create", "-f", "-")
	refused("a value above the user range", sched20Class("sched20-high", 1000000001, ""),
		"value: Forbidden: maximum allowed value of a user defined priority is 1000000000", "create", "-f", "-")

	c.apply(t, "", sched20Class("sched20-high", 1000, "description: first\n"))
	c.apply(t, "", sched20Class("sched20-quiet", 500, "preemptionPolicy: Never\n"))
	refused("changing the value", "", "value: Forbidden: may not be changed in an update.",
		"patch", "priorityclass", "sched20-high", "--type=merge", "-p", `{"value":7}`)
	s.must(t, "patch", "priorityclass", "sched20-high", "--type=merge", "-p", `{"description":"updated description"}`)
	if got := s.must(t, "get", "pc", "sched20-high", "-o", "jsonpath={.value} {.description} {.preemptionPolicy} {.metadata.generation}"); got != "1000 updated description PreemptLowerPriority 1" {
		t.Errorf("sched20-high after the description patch: %q", got)
	}

	c.apply(t, ns, sched20Pod("high", "sched20-high", "", 0, ""))
	c.apply(t, ns, sched20Pod("quiet", "sched20-quiet", "", 0, ""))
	c.apply(t, ns, sched20Pod("plain", "", "", 0, ""))
	for pod, want := range map[string]string{"high": "1000 PreemptLowerPriority sched20-high", "quiet": "500 Never sched20-quiet", "plain": "0 PreemptLowerPriority "} {
		if got := s.must(t, "get", "pod", pod, "-n", ns, "-o", "jsonpath={.spec.priority} {.spec.preemptionPolicy} {.spec.priorityClassName}"); got != want {
			t.Errorf("pod %s: priority, policy, class = %q, want %q", pod, got, want)
		}
	}
	refused("an unknown class", sched20Pod("lost", "sched20-nope", "", 0, ""),
		`pods "lost" is forbidden: no PriorityClass with name sched20-nope was found`, "create", "-n", ns, "-f", "-")
	refused("a priority other than the class's", sched20Pod("liar", "sched20-high", "", 0, "")+"  priority: 3\n",
		"the integer value of priority (3) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
		"create", "-n", ns, "-f", "-")

	// A globalDefault class (value 0, harmless to the other tests' pods while it
	// exists) names the pods that name none; a second one is refused.
	c.apply(t, "", sched20Class("sched20-default", 0, "globalDefault: true\n"))
	refused("a second globalDefault", "", "PriorityClass sched20-default is already marked as default. Only one default can exist",
		"patch", "priorityclass", "sched20-quiet", "--type=merge", "-p", `{"globalDefault":true}`)
	c.apply(t, ns, sched20Pod("defaulted", "", "", 0, ""))
	s.must(t, "delete", "priorityclass", "sched20-default")
	if got := s.must(t, "get", "pod", "defaulted", "-n", ns, "-o", "jsonpath={.spec.priorityClassName} {.spec.priority}"); got != "sched20-default 0" {
		t.Errorf("pod created under a globalDefault class: %q, want sched20-default 0", got)
	}
}

// TestSched20Preemption: a low-priority pod holds the only slot of an extended resource
// on one node; a high-priority pod that needs it preempts it as kube-scheduler does. The
// victim (held by a finalizer, as in the conformance spec) gets DisruptionTarget with
// reason PreemptionByScheduler, is marked for deletion and gets a Preempted event; the
// preemptor is nominated to the node with upstream's FailedScheduling text and runs there
// once the victim is gone. Bound pods carry PodScheduled=True.
func TestSched20Preemption(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	node := strings.Fields(s.must(t, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"))[0]
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "patch", "pod", "victim", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
		_, _, _ = s.kubectl(t, "", "delete", "priorityclass", "sched20-low", "sched20-top", "--ignore-not-found")
		escaped := strings.ReplaceAll(sched20Slot, "/", "~1")
		_, _, _ = s.kubectl(t, "", "patch", "node", node, "--subresource=status", "--type=json", "-p",
			`[{"op":"remove","path":"/status/capacity/`+escaped+`"},{"op":"remove","path":"/status/allocatable/`+escaped+`"}]`)
	})
	s.must(t, "patch", "node", node, "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"capacity":{%q:"1"},"allocatable":{%q:"1"}}}`, sched20Slot, sched20Slot))
	c.apply(t, "", sched20Class("sched20-low", 1, ""))
	c.apply(t, "", sched20Class("sched20-top", 1000, ""))

	c.apply(t, ns, sched20Pod("victim", "sched20-low", node, 1, "  finalizers: [example.com/sched20]\n"))
	c.waitReady(t, ns, "victim")
	if got := s.must(t, "get", "pod", "victim", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="PodScheduled")].status}`); got != "True" {
		t.Fatalf("bound victim: PodScheduled %q, want True", got)
	}
	c.apply(t, ns, sched20Pod("preemptor", "sched20-top", node, 1, ""))

	eventually(t, 60*time.Second, "victim marked DisruptionTarget and terminating", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "victim", "-n", ns, "-o",
			`jsonpath={.metadata.deletionTimestamp}|{.status.conditions[?(@.type=="DisruptionTarget")].status}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}|{.status.conditions[?(@.type=="DisruptionTarget")].message}`)
		f := strings.Split(out, "|")
		return len(f) == 4 && f[0] != "" && f[1] == "True" && f[2] == "PreemptionByScheduler" &&
			f[3] == "default-scheduler: preempting to accommodate a higher priority pod", out
	})
	eventually(t, 30*time.Second, "preemptor nominated with upstream's FailedScheduling text", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "preemptor", "-n", ns, "-o", `jsonpath={.status.nominatedNodeName}|{.status.conditions[?(@.type=="PodScheduled")].reason}`)
		return out == node+"|Unschedulable", out
	})
	events := s.must(t, "get", "events", "-n", ns, "-o", "jsonpath={range .items[*]}{.involvedObject.name} {.reason} {.message}{\"\\n\"}{end}")
	wantFailed := "preemptor FailedScheduling 0/3 nodes are available: 1 Insufficient " + sched20Slot + ", 2 node(s) didn't match Pod's node affinity/selector. " +
		"preemption: found a potential placement for pod on node " + node + ", preempting 1 victims"
	if !strings.Contains(events, wantFailed) || !regexp.MustCompile(`(?m)^victim Preempted Preempted by pod \S+ on node `+node+`$`).MatchString(events) {
		t.Errorf("events:\n%s\nwant a line %q and victim Preempted", events, wantFailed)
	}

	// The finalizer holds the victim: the preemptor waits for it, then runs.
	s.must(t, "patch", "pod", "victim", "-n", ns, "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	c.waitReady(t, ns, "preemptor")
	if got := s.must(t, "get", "pod", "preemptor", "-n", ns, "-o", `jsonpath={.spec.nodeName} {.status.conditions[?(@.type=="PodScheduled")].status}`); got != node+" True" {
		t.Errorf("preemptor: node and PodScheduled %q, want %q", got, node+" True")
	}
}

// TestSched20Unschedulable: a pod no node can take gets PodScheduled=False, reason
// Unschedulable, with kube-scheduler's message, and a FailedScheduling event saying the
// same.
func TestSched20Unschedulable(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, sched20Pod("restricted", "", "", 0, "")+"  nodeSelector: {label: nonempty}\n")
	const want = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	eventually(t, 30*time.Second, "PodScheduled=False Unschedulable", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pod", "restricted", "-n", ns, "-o",
			`jsonpath={.status.conditions[?(@.type=="PodScheduled")].status} {.status.conditions[?(@.type=="PodScheduled")].reason} {.status.conditions[?(@.type=="PodScheduled")].message}`)
		return out == "False Unschedulable "+want, out
	})
	events := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.name=restricted,reason=FailedScheduling", "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, want) {
		t.Errorf("FailedScheduling events: %q, want %q", events, want)
	}
}
