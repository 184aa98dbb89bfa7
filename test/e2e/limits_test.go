package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPatchCostBounds sends kubectl patches that cost far more to apply than to send
// (issue 16): they are refused with kube-apiserver's messages, and an ordinary JSON
// patch still applies.
func TestPatchCostBounds(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "create", "configmap", "x", "-n", ns, "--from-literal=k="+strings.Repeat("v", 4096))

	// 17 copies of data into itself would make the object 2^17 times larger.
	copies := make([]string, 17)
	for i := range copies {
		copies[i] = fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/c%d"}`, i)
	}
	_, errOut, err := s.kubectl(t, "", "patch", "cm", "x", "-n", ns, "--type=json", "-p", "["+strings.Join(copies, ",")+"]")
	if err == nil || !strings.Contains(errOut, "The request is invalid: Unable to complete the copy, the accumulated size increase of copy is") ||
		!strings.Contains(errOut, "exceeding the limit 3145728") {
		t.Fatalf("17 doubling copies: want Invalid naming the copy limit, got err=%v\n%s", err, errOut)
	}

	// Too many operations: sent as a file, the patch is larger than one argument may be.
	ops := make([]string, 10001)
	for i := range ops {
		ops[i] = `{"op":"test","path":"/metadata/name","value":"x"}`
	}
	file := filepath.Join(t.TempDir(), "patch.json")
	if err := os.WriteFile(file, []byte("["+strings.Join(ops, ",")+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = s.kubectl(t, "", "patch", "cm", "x", "-n", ns, "--type=json", "--patch-file", file)
	if err == nil || !strings.Contains(errOut, "The allowed maximum operations in a JSON patch is 10000, got 10001") {
		t.Fatalf("10001 operations: err=%v\n%s", err, errOut)
	}

	// Deeper than the JSON decoder's 10000 levels.
	deep := `{"data":` + strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat(`}`, 10001) + `}`
	if err := os.WriteFile(file, []byte(deep), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = s.kubectl(t, "", "patch", "cm", "x", "-n", ns, "--type=merge", "--patch-file", file)
	if err == nil || !strings.Contains(errOut, "exceeded max depth") {
		t.Fatalf("merge patch nested 10001 deep: err=%v\n%s", err, errOut)
	}

	if out := s.must(t, "get", "cm", "x", "-n", ns, "-o", "go-template={{len .data}}"); out != "1" {
		t.Fatalf("refused patches changed the ConfigMap: %s keys", out)
	}
	s.must(t, "patch", "cm", "x", "-n", ns, "--type=json", "-p", `[{"op":"copy","from":"/data/k","path":"/data/k2"},{"op":"add","path":"/data/n","value":"1"}]`)
	if out := s.must(t, "get", "cm", "x", "-n", ns, "-o", "jsonpath={.data.n} {.data.k2}"); out != "1 "+strings.Repeat("v", 4096) {
		t.Fatalf("ordinary json patch: %.40s...", out)
	}
}
