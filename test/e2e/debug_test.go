package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The tests of this file are issue 15's ephemeral containers and default tolerations
// on the shared `tranche up`, driven the way users drive them: kubectl debug, and the
// pod kubectl shows. Whether the node agent runs the ephemeral container is another
// part of the issue.

// debugTarget is the pod kubectl debug is pointed at.
const debugTarget = `apiVersion: v1
kind: Pod
metadata: {name: target}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: c, image: busybox:1.37, command: ["sleep", "3600"]}
`

// defaultTolerationsYAML is how kubectl prints the tolerations every pod gets from
// admission unless it has its own.
const defaultTolerationsYAML = `  tolerations:
  - effect: NoExecute
    key: node.kubernetes.io/not-ready
    operator: Exists
    tolerationSeconds: 300
  - effect: NoExecute
    key: node.kubernetes.io/unreachable
    operator: Exists
    tolerationSeconds: 300
`

// TestDebugEphemeralContainers: kubectl debug POD --image --target adds an ephemeral
// container through pods/ephemeralcontainers, a second one is added beside it, and one
// with ports is refused with Kubernetes' field error, whether it comes from kubectl
// debug --custom or from a patch of the subresource; the target keeps running.
func TestDebugEphemeralContainers(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, debugTarget)
	c.waitReady(t, ns, "target")
	ephemeral := func(t *testing.T) string {
		t.Helper()
		return s.must(t, "get", "pod", "target", "-n", ns, "-o",
			`jsonpath={range .spec.ephemeralContainers[*]}{.name} {.image} {.targetContainerName} {.command}{"\n"}{end}`)
	}

	var first string
	t.Run("kubectl debug --target", func(t *testing.T) {
		out, errOut, err := s.kubectl(t, "", "debug", "target", "-n", ns, "--image=busybox:1.37", "--target=c", "--", "sleep", "1")
		if err != nil {
			t.Fatalf("kubectl debug: %v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		if want := `Targeting container "c".`; !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
		got := ephemeral(t)
		m := regexp.MustCompile(`^(debugger-[a-z0-9]{5}) busybox:1.37 c \["sleep","1"\]\n$`).FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("ephemeral containers: %q, want kubectl debug's debugger-xxxxx running sleep 1 from busybox:1.37 targeting c", got)
		}
		first = m[1]
	})

	t.Run("a second one beside it", func(t *testing.T) {
		if first == "" {
			t.Skip("the first kubectl debug failed")
		}
		if out, errOut, err := s.kubectl(t, "", "debug", "target", "-n", ns, "--image=busybox:1.37", "--container=second", "--", "true"); err != nil {
			t.Fatalf("kubectl debug: %v\nstdout: %s\nstderr: %s", err, out, errOut)
		}
		want := first + ` busybox:1.37 c ["sleep","1"]` + "\n" + `second busybox:1.37  ["true"]` + "\n"
		if got := ephemeral(t); got != want {
			t.Errorf("ephemeral containers:\n got %q\nwant %q", got, want)
		}
	})

	t.Run("the agent runs it in the target's PID namespace", func(t *testing.T) {
		if _, errOut, err := s.kubectl(t, "", "debug", "target", "-n", ns, "--image=busybox:1.37", "--target=c", "--container=ps", "--", "ps", "-o", "args"); err != nil {
			t.Fatalf("kubectl debug: %v\n%s", err, errOut)
		}
		eventually(t, 30*time.Second, "the ps container ended with 0", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pod", "target", "-n", ns, "-o",
				`jsonpath={.status.ephemeralContainerStatuses[?(@.name=="ps")].state.terminated.exitCode}`)
			return out == "0", out
		})
		if out := s.must(t, "logs", "target", "-n", ns, "-c", "ps"); !strings.Contains(out, "sleep 3600") {
			t.Errorf("ps in the ephemeral container: %q, want the target's sleep 3600", out)
		}
		// Interactive, as kubectl debug -it is used (without a terminal here).
		out, errOut, err := s.kubectl(t, "ps -o args\nexit\n", "debug", "-i", "target", "-n", ns, "--image=busybox:1.37", "--target=c", "--container=shell", "--", "sh")
		if err != nil || !strings.Contains(out, "sleep 3600") {
			t.Errorf("kubectl debug -i: %v\nstdout: %s\nstderr: %s\nwant ps to show the target's sleep 3600", err, out, errOut)
		}
		if out := s.must(t, "get", "pod", "target", "-n", ns, "-o", "jsonpath={.status.containerStatuses[0].restartCount} {.status.phase}"); out != "0 Running" {
			t.Errorf("the target after debugging: %q, want 0 restarts and Running", out)
		}
	})

	t.Run("ports refused through kubectl debug --custom", func(t *testing.T) {
		custom := filepath.Join(t.TempDir(), "ports.json")
		if err := os.WriteFile(custom, []byte(`{"ports":[{"containerPort":80}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := s.kubectl(t, "", "debug", "target", "-n", ns, "--image=busybox:1.37", "--custom="+custom, "--", "true")
		re := regexp.MustCompile(`The Pod "target" is invalid: spec\.ephemeralContainers\[\d+\]\.ports: Forbidden: cannot be set for an Ephemeral Container`)
		if err == nil || !re.MatchString(errOut) {
			t.Errorf("kubectl debug with ports: %v\nstderr: %s\nwant it to match: %s", err, errOut, re)
		}
	})

	t.Run("ports refused through a patch of the subresource", func(t *testing.T) {
		patch := `[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"web","image":"busybox:1.37","ports":[{"containerPort":80}]}}]`
		pod, err := s.client(t).CoreV1().Pods(ns).Get(t.Context(), "target", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.client(t).CoreV1().Pods(ns).Patch(t.Context(), "target", types.JSONPatchType, []byte(patch), metav1.PatchOptions{}, "ephemeralcontainers")
		want := fmt.Sprintf(`Pod "target" is invalid: spec.ephemeralContainers[%d].ports: Forbidden: cannot be set for an Ephemeral Container`, len(pod.Spec.EphemeralContainers))
		if !apierrors.IsInvalid(err) || err.Error() != want {
			t.Errorf("patch with ports:\n got %v\nwant %s", err, want)
		}
	})

	t.Run("a pod update may not touch them", func(t *testing.T) {
		pod, err := s.client(t).CoreV1().Pods(ns).Get(t.Context(), "target", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pod.Spec.EphemeralContainers = nil
		_, err = s.client(t).CoreV1().Pods(ns).Update(t.Context(), pod, metav1.UpdateOptions{})
		if want := "spec: Forbidden: pod updates may not change fields other than"; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("update removing an ephemeral container: got %v, want Invalid with %q", err, want)
		}
	})

	// The target was not disturbed.
	if got := s.must(t, "get", "pod", "target", "-n", ns, "-o", `jsonpath={.status.phase} {.status.containerStatuses[0].restartCount}`); got != "Running 0" {
		t.Errorf("target after debugging: %q, want Running 0", got)
	}
}

// TestDebugDefaultTolerations: a created pod carries Kubernetes' default not-ready and
// unreachable tolerations of 300 s; a pod that tolerates one of those taints itself
// keeps its own and gets only the other.
func TestDebugDefaultTolerations(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, debugTarget)
	if out := s.must(t, "get", "pod", "target", "-n", ns, "-o", "yaml"); !strings.Contains(out, defaultTolerationsYAML) {
		t.Errorf("kubectl get pod -o yaml lacks\n%s\nin\n%s", defaultTolerationsYAML, out)
	}

	own := `apiVersion: v1
kind: Pod
metadata: {name: own}
spec:
  containers:
  - {name: c, image: busybox:1.37}
  tolerations:
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute}
`
	out, errOut, err := s.kubectl(t, own, "create", "-n", ns, "--dry-run=server", "-o", "jsonpath={.spec.tolerations}", "-f", "-")
	if err != nil {
		t.Fatalf("kubectl create --dry-run=server: %v\n%s", err, errOut)
	}
	want := `[{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists"},` +
		`{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300}]`
	if out != want {
		t.Errorf("tolerations of a pod with its own:\n got %s\nwant %s", out, want)
	}
}
