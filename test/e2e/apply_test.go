package e2e

import (
	"strings"
	"testing"
)

// TestServerSideApply drives `kubectl apply --server-side` on the seed manifests: objects
// are created and re-applied, and their managedFields name kubectl as the applier.
func TestServerSideApply(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	out := s.must(t, "apply", "--server-side", "-n", ns, "-f", "testdata/000-api.yaml")
	for _, want := range []string{"deployment.apps/api serverside-applied", "service/api-svc serverside-applied"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply --server-side output lacks %q:\n%s", want, out)
		}
	}
	if out := s.must(t, "apply", "--server-side", "-n", ns, "-f", "testdata/000-api.yaml"); !strings.Contains(out, "service/api-svc serverside-applied") {
		t.Fatalf("second apply --server-side:\n%s", out)
	}
	y := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"managedFields:", "manager: kubectl", "operation: Apply", `k:{"port":80,"protocol":"TCP"}`, "f:selector:"} {
		if !strings.Contains(y, want) {
			t.Fatalf("--show-managed-fields lacks %q:\n%s", want, y)
		}
	}
	if y := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "yaml"); strings.Contains(y, "managedFields") {
		t.Fatalf("kubectl shows managedFields without --show-managed-fields:\n%s", y)
	}
	// The manifest's fields are the applier's, defaults are not: dropping targetPort
	// from the applied configuration removes it (back to its default, the port).
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: api-svc\nspec:\n  selector:\n    app: api\n  ports:\n  - port: 80\n"
	if _, errOut, err := s.kubectl(t, svc, "apply", "--server-side", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply without targetPort: %v\n%s", err, errOut)
	}
	if got := s.must(t, "get", "svc", "api-svc", "-n", ns, "-o", "jsonpath={.spec.ports[0].targetPort}"); got != "80" {
		t.Fatalf("targetPort = %q after the applier dropped it, want the default 80", got)
	}
}

// TestServerSideApplyConflict has two field managers set the same field: the second is
// refused with Kubernetes' message naming the field and its manager, then takes it with
// --force-conflicts, and both managers show in the managedFields.
func TestServerSideApplyConflict(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	a := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: \"1\"\n  owner: a\n"
	if _, errOut, err := s.kubectl(t, a, "apply", "--server-side", "--field-manager=a", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply as a: %v\n%s", err, errOut)
	}
	b := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  level: \"2\"\n"
	_, errOut, err := s.kubectl(t, b, "apply", "--server-side", "--field-manager=b", "-n", ns, "-f", "-")
	if err == nil {
		t.Fatal("b changed a's field without a conflict")
	}
	if want := `Apply failed with 1 conflict: conflict with "a": .data.level`; !strings.Contains(errOut, want) {
		t.Fatalf("conflict error lacks %q:\n%s", want, errOut)
	}
	if got := s.must(t, "get", "cm", "settings", "-n", ns, "-o", "jsonpath={.data.level}"); got != "1" {
		t.Fatalf("data.level = %q after the refused apply, want 1", got)
	}
	if _, errOut, err := s.kubectl(t, b, "apply", "--server-side", "--field-manager=b", "--force-conflicts", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply --force-conflicts as b: %v\n%s", err, errOut)
	}
	if got := s.must(t, "get", "cm", "settings", "-n", ns, "-o", "jsonpath={.data.level}"); got != "2" {
		t.Fatalf("data.level = %q after the forced apply, want 2", got)
	}
	y := s.must(t, "get", "cm", "settings", "-n", ns, "-o", "yaml", "--show-managed-fields")
	for _, want := range []string{"manager: a", "manager: b", "f:owner: {}", "f:level: {}"} {
		if !strings.Contains(y, want) {
			t.Fatalf("--show-managed-fields lacks %q:\n%s", want, y)
		}
	}
	// a kept owner and lost level: its entry names owner only.
	if entry := managedEntry(y, "a"); !strings.Contains(entry, "f:owner") || strings.Contains(entry, "f:level") {
		t.Fatalf("a's entry should name owner only after b forced level:\n%s", y)
	}
}

// managedEntry returns the fieldsV1 block of manager's entry in a `-o yaml
// --show-managed-fields` output (the lines from the entry's start to its manager line).
func managedEntry(y, manager string) string {
	end := strings.Index(y, "manager: "+manager+"\n")
	if end < 0 {
		return ""
	}
	start := strings.LastIndex(y[:end], "- apiVersion:")
	if start < 0 {
		return ""
	}
	return y[start:end]
}

// TestClientSideThenServerSideApply migrates an object from client-side to server-side
// apply as kubectl does: kubectl hands the fields of its client-side manager to its
// server-side one (a JSON patch of managedFields the server must honour), so a later
// server-side apply that drops a field removes it, and the last-applied annotation keeps
// tracking what was applied.
func TestClientSideThenServerSideApply(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	v1 := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrated\ndata:\n  a: \"1\"\n  b: \"2\"\n"
	if _, errOut, err := s.kubectl(t, v1, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("client-side apply: %v\n%s", err, errOut)
	}
	y := s.must(t, "get", "cm", "migrated", "-n", ns, "-o", "yaml", "--show-managed-fields")
	if !strings.Contains(y, "manager: kubectl-client-side-apply") || !strings.Contains(y, "operation: Update") {
		t.Fatalf("client-side apply did not record kubectl-client-side-apply as an Update manager:\n%s", y)
	}
	out, errOut, err := s.kubectl(t, v1, "apply", "--server-side", "-n", ns, "-f", "-")
	if err != nil || !strings.Contains(out, "configmap/migrated serverside-applied") {
		t.Fatalf("server-side apply after client-side: %v\n%s%s", err, out, errOut)
	}
	y = s.must(t, "get", "cm", "migrated", "-n", ns, "-o", "yaml", "--show-managed-fields")
	if strings.Contains(y, "manager: kubectl-client-side-apply") || !strings.Contains(managedEntry(y, "kubectl"), "f:b: {}") {
		t.Fatalf("kubectl did not move the client-side fields to its server-side manager:\n%s", y)
	}
	v2 := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: migrated\ndata:\n  a: \"3\"\n"
	if _, errOut, err := s.kubectl(t, v2, "apply", "--server-side", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("second server-side apply: %v\n%s", err, errOut)
	}
	data := s.must(t, "get", "cm", "migrated", "-n", ns, "-o", "jsonpath={.data}")
	if data != `{"a":"3"}` {
		t.Fatalf("data = %s, want b removed and a changed", data)
	}
	last := s.must(t, "get", "cm", "migrated", "-n", ns, "-o", `jsonpath={.metadata.annotations.kubectl\.kubernetes\.io/last-applied-configuration}`)
	if !strings.Contains(last, `"a":"3"`) || strings.Contains(last, `"b"`) {
		t.Fatalf("last-applied-configuration = %s, want the server-side applied configuration", last)
	}
	// And back: a client-side apply works on the migrated object.
	if _, errOut, err := s.kubectl(t, v1, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("client-side apply after server-side: %v\n%s", err, errOut)
	}
	if data := s.must(t, "get", "cm", "migrated", "-n", ns, "-o", "jsonpath={.data}"); data != `{"a":"1","b":"2"}` {
		t.Fatalf("data = %s after the client-side apply, want a=1 b=2", data)
	}
}
