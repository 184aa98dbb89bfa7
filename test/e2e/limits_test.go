package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
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

// TestInFlightLimit runs a server allowing one mutating request at a time: while a
// create whose body has not finished arriving holds that place, another user's create
// is refused with 429 and Retry-After: 1, system:masters is still served, and once
// the first ends the other user is served again.
func TestInFlightLimit(t *testing.T) {
	s, err := startServer([]string{"--max-requests-inflight=1", "--max-mutating-requests-inflight=1"})
	t.Cleanup(func() {
		s.stop()
		_ = os.RemoveAll(s.dataDir)
	})
	if err != nil {
		t.Fatal(err)
	}
	ns := s.namespace(t)
	s.must(t, "create", "rolebinding", "alice-edit", "-n", ns, "--clusterrole=edit", "--user=alice")
	httpClient, err := rest.HTTPClientFor(s.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	url := s.restConfig(t).Host + "/api/v1/namespaces/" + ns + "/configmaps"
	// createAsAlice posts a ConfigMap as alice (impersonated by the admin), its body
	// read from body.
	createAsAlice := func(body io.Reader) (*http.Response, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, body)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Impersonate-User", "alice")
		return httpClient.Do(req)
	}

	// Hold the one mutating place with a create whose body never ends, until released.
	// A controller's request may hold the place for a moment: then ours is refused and
	// sent again.
	var refused *http.Response
	attempt := 0
	eventually(t, 30*time.Second, "a held create and a refused one", func() (bool, string) {
		attempt++
		pr, pw := io.Pipe()
		held := make(chan *http.Response, 1)
		go func() {
			resp, err := createAsAlice(pr)
			if err != nil {
				resp = nil
			}
			held <- resp
		}()
		t.Cleanup(func() { _ = pw.Close() })
		if _, err := pw.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap",`)); err != nil {
			return false, err.Error()
		}
		resp, err := createAsAlice(strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"probe-"}}`))
		if err != nil {
			return false, err.Error()
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			_ = resp.Body.Close()
			_ = pw.CloseWithError(io.ErrUnexpectedEOF)
			return false, fmt.Sprintf("second create answered %d", resp.StatusCode)
		}
		select {
		case r := <-held:
			// Ours was the refused one; the second met a controller's request.
			_ = resp.Body.Close()
			return false, fmt.Sprintf("held create answered early: %v", r)
		default:
		}
		refused = resp
		t.Cleanup(func() { _ = pw.Close() })
		// Admin requests are served over the limit. (A new name each attempt: the held
		// create may still have been refused, its answer not yet read, when this one ran;
		// the attempt is then made again.)
		s.must(t, "create", "configmap", fmt.Sprintf("by-admin-%d", attempt), "-n", ns)
		if _, err := pw.Write([]byte(`"metadata":{"name":"held"}}`)); err != nil {
			return false, err.Error()
		}
		_ = pw.Close()
		if r := <-held; r == nil || r.StatusCode != http.StatusCreated {
			t.Fatalf("held create: %v", r)
		}
		return true, ""
	})
	body, _ := io.ReadAll(refused.Body)
	_ = refused.Body.Close()
	if refused.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"message":"Too many requests, please try again later."`) ||
		!strings.Contains(string(body), `"reason":"TooManyRequests"`) {
		t.Fatalf("429: Retry-After %q, body %s", refused.Header.Get("Retry-After"), body)
	}
	// With the place free again alice is served.
	s.must(t, "create", "configmap", "after", "-n", ns, "--as=alice")
	if out := s.must(t, "get", "configmaps", "-n", ns, "-o", "name"); !strings.Contains(out, "configmap/held") || !strings.Contains(out, "configmap/after") {
		t.Fatalf("configmaps:\n%s", out)
	}
}
