package e2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// imageVolumePods: kitten mounts the e2e suite's kitten image as a volume four ways
// (whole, a directory subPath, a file subPath, and a subPath that is a link, which
// resolves inside the image: etc/os-release -> ../usr/lib/os-release); missing mounts
// an image the node cannot obtain.
const imageVolumePods = `apiVersion: v1
kind: Pod
metadata: {name: kitten}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: ["sleep", "3600"]
    volumeMounts:
    - {name: kitten, mountPath: /volume}
    - {name: kitten, mountPath: /kitten-lib, subPath: usr/lib}
    - {name: kitten, mountPath: /data.json, subPath: data.json}
    - {name: kitten, mountPath: /os-release, subPath: etc/os-release}
  volumes:
  - name: kitten
    image: {reference: "registry.k8s.io/e2e-test-images/kitten:1.8"}
---
apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: busybox:1.37
    command: ["sleep", "3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    image: {reference: "example.com/data:1", pullPolicy: Always}
`

// TestImageVolume: an image volume (KEP 4639) gets its pullPolicy by tag, shows the
// image's files (a file and a directory subPath too), cannot be written to nor run
// from, and is unmounted with the pod; an image the node cannot obtain keeps the container waiting with kubelet's
// ErrImagePull / ImagePullBackOff and Failed event; a bad pullPolicy is refused with
// kube-apiserver's message.
func TestImageVolume(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, imageVolumePods)

	t.Run("pullPolicy defaulted by tag", func(t *testing.T) {
		if got := s.must(t, "get", "pod", "kitten", "-n", ns, "-o", "jsonpath={.spec.volumes[0].image.pullPolicy}"); got != "IfNotPresent" {
			t.Errorf("pullPolicy %q, want IfNotPresent for a tagged reference", got)
		}
	})

	t.Run("the image's files, read-only and not executable", func(t *testing.T) {
		c.waitReady(t, ns, "kitten")
		exec := func(argv ...string) (string, string, int) {
			t.Helper()
			return kubectlEnv(t, s, nil, "", append([]string{"exec", "kitten", "-n", ns, "--"}, argv...)...)
		}
		for _, tc := range []struct{ path, want string }{
			{"/volume/data.json", `"image": "kitten.jpg"`},
			{"/volume/etc/os-release", `NAME="Alpine Linux"`},
			{"/kitten-lib/os-release", `NAME="Alpine Linux"`},
			{"/data.json", `"image": "kitten.jpg"`},
			{"/os-release", `NAME="Alpine Linux"`},
		} {
			if out, errOut, code := exec("cat", tc.path); code != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("cat %s: exit %d, %q %s; want %q", tc.path, code, out, errOut, tc.want)
			}
		}
		if out, errOut, code := exec("touch", "/volume/new"); code == 0 || !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("touch in the image volume: exit %d, %s%s; want a read-only file system", code, out, errOut)
		}
		if out, errOut, code := exec("/volume/tranche", "version"); code == 0 || !strings.Contains(out+errOut, "ermission denied") {
			t.Errorf("running the image's /tranche from the volume: exit %d, %s%s; want permission denied (noexec)", code, out, errOut)
		}
	})

	t.Run("deleting the pod unmounts its image", func(t *testing.T) {
		uid := s.must(t, "get", "pod", "kitten", "-n", ns, "-o", "jsonpath={.metadata.uid}")
		mounted := func() string {
			info, err := os.ReadFile("/proc/self/mountinfo")
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, l := range strings.Split(string(info), "\n") {
				if strings.Contains(l, uid) && strings.Contains(l, "kubernetes.io~image") {
					lines = append(lines, l)
				}
			}
			return strings.Join(lines, "\n")
		}
		if m := mounted(); !strings.Contains(m, " ro,") {
			t.Fatalf("no read-only image mount of pod %s on the node: %q", uid, m)
		}
		s.must(t, "delete", "pod", "kitten", "-n", ns, "--wait=true", "--timeout=30s")
		eventually(t, 10*time.Second, "the image volume unmounted", func() (bool, string) {
			m := mounted()
			return m == "", m
		})
	})

	t.Run("an image the node cannot obtain", func(t *testing.T) {
		c.waitRow(t, 30*time.Second, ns, "pod/missing", regexp.MustCompile(`^missing\s+0/1\s+(ErrImagePull|ImagePullBackOff)\s+0\s`))
		eventually(t, 30*time.Second, "kubelet's Failed event", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=missing,reason=Failed", "-o", "jsonpath={.items[*].message}")
			return strings.Contains(out, `Failed to pull image "example.com/data:1"`) && strings.Contains(out, "Error: ErrImagePull"), out
		})
		c.waitRow(t, 30*time.Second, ns, "pod/missing", regexp.MustCompile(`^missing\s+0/1\s+ImagePullBackOff\s+0\s`))
		if msg := s.must(t, "get", "pod", "missing", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.message}"); !strings.HasPrefix(msg, `Back-off pulling image "example.com/data:1"`) {
			t.Errorf("waiting message %q, want kubelet's back-off naming the volume's image", msg)
		}
	})

	t.Run("a pullPolicy that does not exist", func(t *testing.T) {
		bad := strings.ReplaceAll(strings.SplitN(imageVolumePods, "---\n", 2)[1], "pullPolicy: Always", "pullPolicy: Sometimes")
		bad = strings.ReplaceAll(bad, "name: missing", "name: sometimes")
		_, errOut, err := s.kubectl(t, bad, "apply", "-n", ns, "-f", "-")
		want := `spec.volumes[0].image.pullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"`
		if err == nil || !strings.Contains(errOut, want) {
			t.Errorf("kubectl apply: %v, %s; want %q", err, errOut, want)
		}
	})
}
