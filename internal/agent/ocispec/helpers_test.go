package ocispec

import (
	"os"
	"path/filepath"
	"testing"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makePod is a pod "web" in "default" with one container "app" (image busybox), changed
// by the mutations.
func makePod(mutate ...func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "1234"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox"}}},
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

// withSC sets the first container's security context.
func withSC(sc *v1.SecurityContext) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.Containers[0].SecurityContext = sc }
}

// withPodSC sets the pod's security context.
func withPodSC(sc *v1.PodSecurityContext) func(*v1.Pod) {
	return func(p *v1.Pod) { p.Spec.SecurityContext = sc }
}

// resources is a container's requests and limits, e.g. ("100m", "64Mi", "", "") for
// requests only; "" leaves a resource out.
func resources(cpuReq, memReq, cpuLim, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{}
	set := func(l *v1.ResourceList, name v1.ResourceName, q string) {
		if q == "" {
			return
		}
		if *l == nil {
			*l = v1.ResourceList{}
		}
		(*l)[name] = resource.MustParse(q)
	}
	set(&r.Requests, v1.ResourceCPU, cpuReq)
	set(&r.Requests, v1.ResourceMemory, memReq)
	set(&r.Limits, v1.ResourceCPU, cpuLim)
	set(&r.Limits, v1.ResourceMemory, memLim)
	return r
}

// testRootfs is a root file system with an /etc/passwd and /etc/group like busybox's
// plus users "app" (1000) and "nobody" (65534).
func testRootfs(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(root, "etc", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("passwd", "# comment\nroot:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\n"+
		"app:x:1000:1000:app:/home/app:/bin/sh\nbroken line\nnobody:x:65534:65534:nobody:/home:/bin/false\n")
	write("group", "root:x:0:\nwheel:x:10:root\naudio:x:29:app,root\napp:x:1000:app\nstaff:x:50:app\nnogroup:x:65534:\n")
	return root
}

// makeInput is the Input for pod's first container with a test root file system, the
// image config img, a pod network namespace and 8 GB of node memory.
func makeInput(t *testing.T, pod *v1.Pod, img crv1.Config) Input {
	t.Helper()
	return Input{
		Pod:         pod,
		Container:   &pod.Spec.Containers[0],
		Image:       img,
		Rootfs:      testRootfs(t),
		NetNS:       "/run/netns/pod",
		IPCNS:       "/proc/10/ns/ipc",
		UTSNS:       "/proc/10/ns/uts",
		Hostname:    "web",
		CgroupsPath: "/tranche/node-1/pod1234/c1",
		NodeMemory:  8_000_000_000,
		SeccompDir:  t.TempDir(),
	}
}

// shImage is an image running /bin/sh.
var shImage = crv1.Config{Cmd: []string{"sh"}}
