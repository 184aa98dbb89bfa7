package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// resizePod has two Burstable containers: app resizes cpu and memory in place, mem
// restarts for a memory change (resizePolicy RestartContainer).
const resizePod = `apiVersion: v1
kind: Pod
metadata:
  name: rs
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.37
    command: ["sleep", "3600"]
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 200m, memory: 64Mi}
  - name: mem
    image: busybox:1.37
    command: ["sleep", "3600"]
    resizePolicy:
    - {resourceName: memory, restartPolicy: RestartContainer}
    resources:
      requests: {cpu: 50m, memory: 16Mi}
      limits: {memory: 32Mi}
`

// hogPod holds 40Mi of memory (a file in its tmpfs /dev/shm) under a 64Mi limit.
const hogPod = `apiVersion: v1
kind: Pod
metadata:
  name: hog
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: hog
    image: busybox:1.37
    command: ["sh", "-c", "dd if=/dev/zero of=/dev/shm/f bs=1M count=40 && touch /tmp/full && sleep 3600"]
    readinessProbe:
      exec: {command: ["cat", "/tmp/full"]}
      periodSeconds: 1
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
`

// cgroupValue reads a control file of the container's own cgroup from inside it: the
// cgroup v2 name, or the v1 one in its controller's directory. cpu.max's quota (its
// first field) compares with v1's cpu.cfs_quota_us, "max" with -1.
func cgroupValue(t *testing.T, c *localCluster, ns, pod, ctr, v2, v1 string) string {
	t.Helper()
	out, errOut, err := c.srv.kubectl(t, "", "exec", "-n", ns, pod, "-c", ctr, "--", "sh", "-c",
		fmt.Sprintf("cat /sys/fs/cgroup/%s 2>/dev/null || cat /sys/fs/cgroup/%s", v2, v1))
	if err != nil {
		return "error: " + err.Error() + errOut
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return ""
	}
	if f[0] == "max" {
		return "-1"
	}
	return f[0]
}

// waitCgroup polls the container's cpu quota and memory limit until they are want.
func waitCgroup(t *testing.T, c *localCluster, ns, pod, ctr, wantQuota, wantMemory string) {
	t.Helper()
	eventually(t, 20*time.Second, ctr+"'s cgroup quota "+wantQuota+" memory "+wantMemory, func() (bool, string) {
		q := cgroupValue(t, c, ns, pod, ctr, "cpu.max", "cpu/cpu.cfs_quota_us")
		m := cgroupValue(t, c, ns, pod, ctr, "memory.max", "memory/memory.limit_in_bytes")
		return q == wantQuota && m == wantMemory, "quota " + q + " memory " + m
	})
}

// TestPodResize resizes a running pod through pods/resize as kubectl does: the cgroups
// change in place, the status reports the allocation, a RestartContainer policy
// restarts its container, a resize the node cannot hold stays Deferred, and a plain
// update still may not change resources.
func TestPodResize(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, resizePod)
	c.waitReady(t, ns, "rs")
	waitCgroup(t, c, ns, "rs", "app", "20000", "67108864")
	if w := cgroupValue(t, c, ns, "rs", "app", "cpu.weight", "cpu/cpu.shares"); w == "" || strings.HasPrefix(w, "error") || w == "0" {
		t.Fatalf("app's cpu weight/shares = %q", w)
	}
	status := func(ctr string) string {
		return s.must(t, "get", "pod", "rs", "-n", ns, "-o", fmt.Sprintf(
			`jsonpath={.metadata.generation} {.status.observedGeneration} {.status.containerStatuses[?(@.name=="%s")].allocatedResources.cpu} {.status.containerStatuses[?(@.name=="%[1]s")].resources.limits.cpu} {.status.containerStatuses[?(@.name=="%[1]s")].resources.limits.memory} {.status.containerStatuses[?(@.name=="%[1]s")].restartCount} {.status.conditions[?(@.type=="PodResizePending")].reason}{.status.conditions[?(@.type=="PodResizeInProgress")].status}`, ctr))
	}
	if got := status("app"); got != "1 1 100m 200m 64Mi 0 " {
		t.Fatalf("app's status before the resize = %q", got)
	}

	t.Run("in place", func(t *testing.T) {
		out := s.must(t, "patch", "pod", "rs", "-n", ns, "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m","memory":"96Mi"}}}]}}`)
		if !strings.Contains(out, "pod/rs patched") {
			t.Fatalf("patch: %s", out)
		}
		waitCgroup(t, c, ns, "rs", "app", "30000", "100663296")
		eventually(t, 20*time.Second, "app's status after the resize", func() (bool, string) {
			got := status("app")
			return got == "2 2 150m 300m 96Mi 0 ", got
		})
		// The subresource's GET is the pod.
		if got := s.must(t, "get", "pod", "rs", "-n", ns, "--subresource", "resize", "-o", "jsonpath={.spec.containers[0].resources.limits.cpu}"); got != "300m" {
			t.Fatalf("GET pods/resize: limits.cpu = %q", got)
		}
	})

	t.Run("restart policy", func(t *testing.T) {
		s.must(t, "patch", "pod", "rs", "-n", ns, "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"mem","resources":{"limits":{"memory":"48Mi"}}}]}}`)
		eventually(t, 30*time.Second, "mem restarted with its new memory limit", func() (bool, string) {
			got := status("mem")
			return got == "3 3 50m  48Mi 1 ", got
		})
		c.waitReady(t, ns, "rs")
		waitCgroup(t, c, ns, "rs", "mem", "-1", "50331648")
	})

	t.Run("deferred", func(t *testing.T) {
		s.must(t, "patch", "pod", "rs", "-n", ns, "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1000"},"limits":{"cpu":"1000"}}}]}}`)
		eventually(t, 20*time.Second, "PodResizePending Deferred", func() (bool, string) {
			got := s.must(t, "get", "pod", "rs", "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="PodResizePending")].reason}: {.status.conditions[?(@.type=="PodResizePending")].message}`)
			return strings.HasPrefix(got, "Deferred: Node didn't have enough resource: cpu, requested: 1000") && strings.Contains(got, ", capacity: "), got
		})
		// Nothing changed in the container meanwhile.
		waitCgroup(t, c, ns, "rs", "app", "30000", "100663296")
		if got := status("app"); !strings.HasPrefix(got, "4 4 150m 300m 96Mi 0 Deferred") {
			t.Fatalf("app's status while deferred = %q", got)
		}
	})

	t.Run("memory limit below usage", func(t *testing.T) {
		c.apply(t, ns, hogPod)
		c.waitReady(t, ns, "hog")
		s.must(t, "patch", "pod", "hog", "-n", ns, "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"hog","resources":{"limits":{"memory":"20Mi"}}}]}}`)
		eventually(t, 20*time.Second, "PodResizeInProgress Error", func() (bool, string) {
			got := s.must(t, "get", "pod", "hog", "-n", ns, "-o",
				`jsonpath={.status.conditions[?(@.type=="PodResizeInProgress")].reason}: {.status.conditions[?(@.type=="PodResizeInProgress")].message}`)
			// The pod's limit goes down with its only container's: kubelet lists both.
			return strings.HasPrefix(got, "Error: cannot decrease memory limits: [attempting to set pod memory limit (20971520) below current usage (") &&
				strings.Contains(got, `attempting to set container "hog" memory limit (20971520) below current usage (`), got
		})
		waitCgroup(t, c, ns, "hog", "hog", "-1", "67108864")
	})

	t.Run("plain update refused", func(t *testing.T) {
		_, errOut, err := s.kubectl(t, "", "patch", "pod", "rs", "-n", ns, "-p",
			`{"spec":{"containers":[{"name":"app","resources":{"limits":{"cpu":"400m"}}}]}}`)
		if err == nil || !strings.Contains(errOut, "pod updates may not change fields other than") {
			t.Fatalf("a plain patch of resources: err=%v\n%s", err, errOut)
		}
		_, errOut, err = s.kubectl(t, "", "patch", "pod", "rs", "-n", ns, "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"300m","memory":"96Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}},{"name":"mem","resources":{"requests":{"cpu":"50m","memory":"48Mi"},"limits":{"cpu":"50m","memory":"48Mi"}}}]}}`)
		if err == nil || !strings.Contains(errOut, "Pod QOS Class may not change as a result of resizing") {
			t.Fatalf("a resize to Guaranteed: err=%v\n%s", err, errOut)
		}
	})
}
