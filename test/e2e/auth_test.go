package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServiceAccountTokenAndRBAC: a service account's token (kubectl create token) is
// refused listing pods until a RoleBinding to view exists, and kubectl auth can-i agrees.
func TestServiceAccountTokenAndRBAC(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "create", "serviceaccount", "robot", "-n", ns)
	token := strings.TrimSpace(s.must(t, "create", "token", "robot", "-n", ns))
	if strings.Count(token, ".") != 2 {
		t.Fatalf("token is not a JWT: %q", token)
	}
	listPods := func() (string, string) {
		out, err := exec.Command("curl", "-sk", "-H", "Authorization: Bearer "+token, "-w", "\n%{http_code}",
			"https://"+s.listen+"/api/v1/namespaces/"+ns+"/pods").Output()
		if err != nil {
			t.Fatalf("curl: %v", err)
		}
		body, code, _ := strings.Cut(string(out), "\n")
		if i := strings.LastIndex(string(out), "\n"); i >= 0 {
			body, code = string(out[:i]), string(out[i+1:])
		}
		return code, body
	}
	code, body := listPods()
	want := `pods is forbidden: User \"system:serviceaccount:` + ns + `:robot\" cannot list resource \"pods\" in API group \"\" in the namespace \"` + ns + `\"`
	if code != "403" || !strings.Contains(body, want) {
		t.Fatalf("before binding: HTTP %s %s\nwant 403 with %s", code, body, want)
	}
	as := "--as=system:serviceaccount:" + ns + ":robot"
	out, _, _ := s.kubectl(t, "", "auth", "can-i", "list", "pods", "-n", ns, as)
	if strings.TrimSpace(out) != "no" {
		t.Fatalf("can-i before binding: %q", out)
	}
	s.must(t, "create", "rolebinding", "robot-view", "-n", ns, "--clusterrole=view", "--serviceaccount="+ns+":robot")
	if out := s.must(t, "get", "rolebinding", "robot-view", "-n", ns); !strings.Contains(out, "ClusterRole/view") {
		t.Fatalf("rolebinding table:\n%s", out)
	}
	code, body = listPods()
	if code != "200" || !strings.Contains(body, `"kind":"PodList"`) {
		t.Fatalf("after binding: HTTP %s %s", code, body)
	}
	if out := s.must(t, "auth", "can-i", "list", "pods", "-n", ns, as); strings.TrimSpace(out) != "yes" {
		t.Fatalf("can-i after binding: %q", out)
	}
	out, _, _ = s.kubectl(t, "", "auth", "can-i", "delete", "pods", "-n", ns, as)
	if strings.TrimSpace(out) != "no" {
		t.Fatalf("view must not allow delete: %q", out)
	}
	out, _, _ = s.kubectl(t, "", "auth", "can-i", "list", "pods", "-n", "default", as)
	if strings.TrimSpace(out) != "no" {
		t.Fatalf("a RoleBinding must not reach other namespaces: %q", out)
	}
	if out := s.must(t, "auth", "can-i", "create", "deployments"); strings.TrimSpace(out) != "yes" {
		t.Fatalf("admin can-i: %q", out)
	}
}
