package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tokenKubeconfig writes a kubeconfig for s that authenticates with a service
// account's token (kubectl create token) instead of the admin certificate, so that
// kubectl acts exactly as that account would.
func tokenKubeconfig(t *testing.T, s *server, ns, account string) *server {
	t.Helper()
	token := strings.TrimSpace(s.must(t, "create", "token", account, "-n", ns))
	admin, err := os.ReadFile(s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, admin, 0o600); err != nil {
		t.Fatal(err)
	}
	as := &server{listen: s.listen, kubeconfig: path}
	as.must(t, "config", "set-credentials", account, "--token="+token)
	as.must(t, "config", "set-context", "--current", "--user="+account, "--namespace="+ns)
	if who := as.must(t, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); who != "system:serviceaccount:"+ns+":"+account {
		t.Fatalf("token kubeconfig authenticates as %q", who)
	}
	return as
}

// TestRBACEscalationRefused: a service account bound to admin in its namespace can
// neither bind cluster-admin there nor write a Role granting *.*, both refused with
// Kubernetes' 403 naming the permissions it does not hold and nothing stored; it can
// bind edit and view and write a Role within what admin holds; once granted "bind" on
// cluster-admin it can bind that role.
func TestRBACEscalationRefused(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "create", "serviceaccount", "adm", "-n", ns)
	s.must(t, "create", "serviceaccount", "worker", "-n", ns)
	s.must(t, "create", "rolebinding", "adm-admin", "-n", ns, "--clusterrole=admin", "--serviceaccount="+ns+":adm")
	adm := tokenKubeconfig(t, s, ns, "adm")
	user := `user "system:serviceaccount:` + ns + `:adm" (groups=["system:serviceaccounts" "system:serviceaccounts:` + ns + `" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`

	// The authorizer reads informer caches, which may lag a write by a moment: a refusal
	// is retried until it has the expected text (it must never be allowed), and a write
	// that must be allowed until it is.
	refused := func(what string, wantLines []string, args ...string) {
		t.Helper()
		eventually(t, 20*time.Second, what+" refused with the missing rules", func() (bool, string) {
			out, errOut, err := adm.kubectl(t, "", args...)
			if err == nil {
				t.Fatalf("%s was allowed: %s", what, out)
			}
			for _, want := range wantLines {
				if !strings.Contains(errOut, want) {
					return false, fmt.Sprintf("stderr lacks %q:\n%s", want, errOut)
				}
			}
			t.Logf("%s refused:\n%s", what, errOut)
			return true, ""
		})
	}
	allowed := func(args ...string) {
		t.Helper()
		eventually(t, 20*time.Second, "kubectl "+strings.Join(args, " ")+" as adm", func() (bool, string) {
			_, errOut, err := adm.kubectl(t, "", args...)
			return err == nil, errOut
		})
	}
	refused("binding cluster-admin", []string{
		`rolebindings.rbac.authorization.k8s.io "pwn" is forbidden: ` + user + "\n",
		"\n" + `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}` + "\n",
		"\n" + `{NonResourceURLs:["*"], Verbs:["*"]}`,
	}, "create", "rolebinding", "pwn", "--clusterrole=cluster-admin", "--serviceaccount="+ns+":adm")
	refused("a Role granting *.*", []string{
		`roles.rbac.authorization.k8s.io "pwn" is forbidden: ` + user + "\n" + `{APIGroups:["*"], Resources:["*"], Verbs:["*"]}`,
	}, "create", "role", "pwn", "--verb=*", "--resource=*.*")
	refused("a Role granting nodes (cluster-scoped, not held)", []string{
		`roles.rbac.authorization.k8s.io "nodes" is forbidden: ` + user + "\n" + `{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`,
	}, "create", "role", "nodes", "--verb=get", "--resource=nodes")
	// Kubernetes checks escalation before validation: a Role both escalating and
	// invalid (a namespaced rule naming a non-resource URL) is refused with 403, not 422.
	invalid := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(invalid, []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"pwn-invalid"},
"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"],"nonResourceURLs":["/pwn"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("an invalid Role granting *.*", []string{
		`roles.rbac.authorization.k8s.io "pwn-invalid" is forbidden: ` + user + "\n",
	}, "create", "-f", invalid)
	refused("a dry run of the same binding", []string{"is attempting to grant RBAC permissions not currently held"},
		"create", "rolebinding", "pwn", "--clusterrole=cluster-admin", "--serviceaccount="+ns+":adm", "--dry-run=server")
	for _, kind := range []string{"rolebinding", "role"} {
		if _, errOut, err := s.kubectl(t, "", "get", kind, "pwn", "-n", ns); err == nil || !strings.Contains(errOut, "NotFound") {
			t.Errorf("refused %s pwn exists: %v %s", kind, err, errOut)
		}
	}
	if _, errOut, err := s.kubectl(t, "", "get", "role", "pwn-invalid", "-n", ns); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Errorf("refused role pwn-invalid exists: %v %s", err, errOut)
	}
	if out, _, _ := adm.kubectl(t, "", "auth", "can-i", "create", "nodes"); strings.TrimSpace(out) != "no" {
		t.Fatalf("adm gained cluster rights: can-i create nodes = %q", out)
	}

	// Legitimate neighbours: what admin holds may be granted.
	allowed("create", "rolebinding", "worker-edit", "--clusterrole=edit", "--serviceaccount="+ns+":worker")
	allowed("create", "rolebinding", "worker-view", "--clusterrole=view", "--serviceaccount="+ns+":worker")
	allowed("create", "role", "pod-reader", "--verb=get,list,watch", "--resource=pods,pods/log")
	allowed("create", "rolebinding", "worker-pods", "--role=pod-reader", "--serviceaccount="+ns+":worker")
	if out := s.must(t, "get", "rolebinding", "worker-edit", "-n", ns); !strings.Contains(out, "ClusterRole/edit") {
		t.Fatalf("worker-edit:\n%s", out)
	}
	eventually(t, 20*time.Second, "worker bound to edit may create deployments", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "auth", "can-i", "create", "deployments", "-n", ns, "--as=system:serviceaccount:"+ns+":worker")
		return strings.TrimSpace(out) == "yes", out
	})
	// A binding to a role that does not exist is that NotFound, as in Kubernetes.
	_, errOut, err := adm.kubectl(t, "", "create", "rolebinding", "ghost", "--role=missing", "--serviceaccount="+ns+":worker")
	if err == nil || !strings.Contains(errOut, `"missing" not found`) {
		t.Fatalf("binding a missing role: %v %s", err, errOut)
	}

	// The bind verb on cluster-admin, granted in this namespace, lets adm bind it here.
	binder := "e2e-bind-cluster-admin-" + ns
	s.must(t, "create", "clusterrole", binder, "--verb=bind", "--resource=clusterroles.rbac.authorization.k8s.io", "--resource-name=cluster-admin")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrole", binder) })
	s.must(t, "create", "rolebinding", "adm-bind", "-n", ns, "--clusterrole="+binder, "--serviceaccount="+ns+":adm")
	allowed("create", "rolebinding", "worker-cluster-admin", "--clusterrole=cluster-admin", "--serviceaccount="+ns+":worker")
	// bind is by name: it does not extend to other roles adm does not hold.
	nodeReader := "e2e-node-reader-" + ns
	s.must(t, "create", "clusterrole", nodeReader, "--verb=get", "--resource=nodes")
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrole", nodeReader) })
	refused("binding a role adm holds no bind on", []string{
		`rolebindings.rbac.authorization.k8s.io "nodes" is forbidden: ` + user + "\n" + `{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}`,
	}, "create", "rolebinding", "nodes", "--clusterrole="+nodeReader, "--serviceaccount="+ns+":worker")
}

// TestClusterRoleAggregation: a ClusterRole with an aggregationRule picks up the rules
// of a ClusterRole created later with a matching label and drops them when it goes;
// a role labelled aggregate-to-view reaches view, and through edit, admin.
func TestClusterRoleAggregation(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	agg, part, viewPart := "e2e-agg-"+ns, "e2e-agg-part-"+ns, "e2e-view-part-"+ns
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrole", agg, part, viewPart, "--ignore-not-found") })
	label := "e2e.tranche.dev/aggregate-to-" + ns
	s.must(t, "create", "clusterrole", agg, "--aggregation-rule="+label+"=true")
	// Rules name unique objects, so the test knows them wherever they are aggregated.
	widget, gadget := "widget-"+ns, "gadget-"+ns
	s.must(t, "create", "clusterrole", part, "--verb=get", "--resource=configmaps", "--resource-name="+widget)
	s.must(t, "label", "clusterrole", part, label+"=true")

	rulesOf := func(name string) string {
		out, _, _ := s.kubectl(t, "", "get", "clusterrole", name, "-o", "jsonpath={.rules}")
		return out
	}
	has := func(name, resource string, want bool) {
		t.Helper()
		eventually(t, 30*time.Second, name+" has "+resource+" = "+map[bool]string{true: "true", false: "false"}[want], func() (bool, string) {
			r := rulesOf(name)
			return strings.Contains(r, resource) == want, r
		})
	}
	has(agg, widget, true)

	s.must(t, "create", "clusterrole", viewPart, "--verb=get", "--resource=nodes", "--resource-name="+gadget)
	s.must(t, "label", "clusterrole", viewPart, "rbac.authorization.k8s.io/aggregate-to-view=true")
	has("view", gadget, true)
	has("edit", gadget, true)
	has("admin", gadget, true)
	// A cluster-wide viewer may now read that node, and only that one.
	s.must(t, "create", "clusterrolebinding", "e2e-jane-view-"+ns, "--clusterrole=view", "--user=jane-"+ns)
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "clusterrolebinding", "e2e-jane-view-"+ns) })
	eventually(t, 20*time.Second, "a viewer may get nodes/"+gadget, func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "auth", "can-i", "get", "nodes/"+gadget, "--as=jane-"+ns)
		return strings.TrimSpace(out) == "yes", out
	})
	if out, _, _ := s.kubectl(t, "", "auth", "can-i", "get", "nodes/other", "--as=jane-"+ns); strings.TrimSpace(out) != "no" {
		t.Fatalf("view with an aggregated part: can-i get nodes/other = %q", out)
	}

	s.must(t, "delete", "clusterrole", part, viewPart)
	has(agg, widget, false)
	has("view", gadget, false)
	has("admin", gadget, false)
}
