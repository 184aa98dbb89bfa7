package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const privilegedPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  containers:
  - name: c
    image: busybox
    command: ["sleep", "3600"]
    securityContext:
      privileged: true
`

// Kubernetes' reasons for privilegedPod at the baseline and restricted levels.
const (
	baselineViolations   = `privileged (container "c" must not set securityContext.privileged=true)`
	restrictedViolations = baselineViolations + `, allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
)

// TestPodSecurity: namespace labels select Pod Security levels as on Kubernetes.
// enforce=restricted refuses a privileged pod with Kubernetes' message; warn=baseline
// makes kubectl print the warning and the pod is created; raising the enforce level of
// that namespace warns about the pod; an invalid level is refused.
func TestPodSecurity(t *testing.T) {
	s := shared
	t.Run("enforce", func(t *testing.T) {
		ns := s.namespace(t)
		s.must(t, "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
		_, errOut, err := s.kubectl(t, fmt.Sprintf(privilegedPod, "priv"), "apply", "-n", ns, "-f", "-")
		want := `Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedViolations
		if err == nil || strings.TrimSpace(errOut) != want {
			t.Fatalf("kubectl apply: %v\nstderr: %s\nwant: %s", err, errOut, want)
		}
		if _, errOut, err := s.kubectl(t, "", "get", "pod", "priv", "-n", ns); err == nil || !strings.Contains(errOut, "NotFound") {
			t.Fatalf("the refused pod exists: %v %s", err, errOut)
		}
	})
	t.Run("warn", func(t *testing.T) {
		ns := s.namespace(t)
		s.must(t, "label", "namespace", ns, "pod-security.kubernetes.io/warn=baseline")
		out, errOut, err := s.kubectl(t, fmt.Sprintf(privilegedPod, "priv"), "apply", "-n", ns, "-f", "-")
		if err != nil {
			t.Fatalf("kubectl apply: %v\nstderr: %s", err, errOut)
		}
		want := `Warning: would violate PodSecurity "baseline:latest": ` + baselineViolations
		if strings.TrimSpace(errOut) != want {
			t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
		}
		if strings.TrimSpace(out) != "pod/priv created" {
			t.Errorf("stdout: %q", out)
		}
		s.must(t, "get", "pod", "priv", "-n", ns)

		// Enforcing baseline now would refuse the pod: kubectl prints which.
		_, errOut, err = s.kubectl(t, "", "label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
		if err != nil {
			t.Fatalf("kubectl label: %v\nstderr: %s", err, errOut)
		}
		want = `Warning: existing pods in namespace "` + ns + `" violate the new PodSecurity enforce level "baseline:latest"` + "\nWarning: priv: privileged"
		if strings.TrimSpace(errOut) != want {
			t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
		}

		_, errOut, err = s.kubectl(t, "", "label", "--overwrite", "namespace", ns, "pod-security.kubernetes.io/enforce=strict")
		want = `metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`
		if err == nil || !strings.Contains(errOut, want) {
			t.Errorf("invalid level: %v\nstderr: %s\nwant it to contain: %s", err, errOut, want)
		}
	})
}

// TestPodSecurityDefaults runs its own server with cluster-wide levels set by flags:
// an unlabelled namespace enforces baseline and warns at restricted, kube-system is
// exempt.
func TestPodSecurityDefaults(t *testing.T) {
	s, err := startServer([]string{"--pod-security-enforce", "baseline", "--pod-security-warn", "restricted"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(); _ = os.RemoveAll(s.dataDir) })
	ns := s.namespace(t)
	_, errOut, err := s.kubectl(t, fmt.Sprintf(privilegedPod, "priv"), "apply", "-n", ns, "-f", "-")
	want := `Error from server (Forbidden): error when creating "STDIN": pods "priv" is forbidden: violates PodSecurity "baseline:latest": ` + baselineViolations
	if err == nil || strings.TrimSpace(errOut) != want {
		t.Fatalf("kubectl apply: %v\nstderr: %s\nwant: %s", err, errOut, want)
	}
	_, errOut, err = s.kubectl(t, "", "run", "plain", "-n", ns, "--image=busybox", "--", "sleep", "3600")
	if err != nil {
		t.Fatalf("kubectl run: %v\nstderr: %s", err, errOut)
	}
	want = `Warning: would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "plain" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "plain" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "plain" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "plain" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	if strings.TrimSpace(errOut) != want {
		t.Errorf("kubectl run stderr:\n%s\nwant:\n%s", errOut, want)
	}
	// The server's data, this pod with it, goes at cleanup.
	out, errOut, err := s.kubectl(t, fmt.Sprintf(privilegedPod, "priv"), "apply", "-n", "kube-system", "-f", "-")
	if err != nil || strings.TrimSpace(errOut) != "" {
		t.Fatalf("privileged pod in kube-system: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
}
