package apiserver

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rawResponse is what a test reads of an HTTP answer.
type rawResponse struct {
	code     int
	header   http.Header
	body     string
	status   metav1.Status
	warnings []string
}

func (f *fixture) raw(method, path, contentType, body string) rawResponse {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := rawResponse{code: resp.StatusCode, header: resp.Header, body: string(data), warnings: resp.Header.Values("Warning")}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		_ = json.Unmarshal(data, &out.status)
	}
	return out
}

// TestFieldValidation: without fieldValidation a write keeps what it can decode and warns
// about each unknown or duplicate field (Warn, kube-apiserver's default); Strict refuses
// with every field named; Ignore drops them silently. YAML bodies too.
func TestFieldValidation(t *testing.T) {
	const cms = "/api/v1/namespaces/default/configmaps"
	jsonBody := `{"metadata":{"name":"NAME"},"dta":{},"data":{"a":"1"},"data":{"b":"2"}}`
	yamlBody := "metadata:\n  name: NAME\ndta: 1\ndata:\n  a: '1'\ndata:\n  b: '2'\n"
	yamlDup := `yaml: unmarshal errors:   line 7: key "data" already set in map`
	for _, tc := range []struct {
		name, query, contentType, body string
		code                           int
		warnings                       []string
		message                        string
	}{
		{"json default warns", "", "application/json", jsonBody, 201,
			[]string{`299 - "unknown field \"dta\""`, `299 - "duplicate field \"data\""`}, ""},
		{"json warn", "?fieldValidation=Warn", "application/json", jsonBody, 201,
			[]string{`299 - "unknown field \"dta\""`, `299 - "duplicate field \"data\""`}, ""},
		{"json strict", "?fieldValidation=Strict", "application/json", jsonBody, 400, nil,
			`ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta", duplicate field "data"`},
		{"json ignore", "?fieldValidation=Ignore", "application/json", jsonBody, 201, nil, ""},
		{"yaml default warns", "", "application/yaml", yamlBody, 201,
			[]string{`299 - "` + strings.ReplaceAll(yamlDup, `"`, `\"`) + `"`, `299 - "unknown field \"dta\""`}, ""},
		{"yaml strict", "?fieldValidation=Strict", "application/yaml", yamlBody, 400, nil,
			"ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: yaml: unmarshal errors:\n  line 7: key \"data\" already set in map, unknown field \"dta\""},
		{"yaml ignore", "?fieldValidation=Ignore", "application/yaml", yamlBody, 201, nil, ""},
		{"bad directive", "?fieldValidation=Loud", "application/json", jsonBody, 400, nil,
			`fieldValidation must be one of "Ignore", "Warn", or "Strict", got "Loud"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			got := f.raw("POST", cms+tc.query, tc.contentType, strings.ReplaceAll(tc.body, "NAME", "x"))
			if got.code != tc.code {
				t.Fatalf("code %d, want %d: %s", got.code, tc.code, got.body)
			}
			if d := cmp.Diff(tc.warnings, got.warnings); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
			if got.status.Message != tc.message {
				t.Errorf("message %q, want %q", got.status.Message, tc.message)
			}
			if tc.code != 201 {
				return
			}
			cm, err := f.client.CoreV1().ConfigMaps("default").Get(f.ctx, "x", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Duplicates decode as in Kubernetes' decoders: JSON merges the two
			// objects, YAML keeps the last.
			want := map[string]string{"a": "1", "b": "2"}
			if tc.contentType == "application/yaml" {
				want = map[string]string{"b": "2"}
			}
			if d := cmp.Diff(want, cm.Data); d != "" {
				t.Errorf("stored data (-want +got):\n%s", d)
			}
		})
	}
}

// TestPatchFieldValidation: a patch that adds unknown fields warns by default and is
// refused under Strict with the plain strict decoding error, as kube-apiserver's patch
// handler words it.
func TestPatchFieldValidation(t *testing.T) {
	f := newFixture(t)
	if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/namespaces/default/configmaps/p"
	got := f.raw("PATCH", path, "application/strategic-merge-patch+json", `{"spec":{"foo":1}}`)
	if d := cmp.Diff([]string{`299 - "unknown field \"spec\""`}, got.warnings); got.code != 200 || d != "" {
		t.Errorf("default patch: %d, warnings (-want +got):\n%s", got.code, d)
	}
	got = f.raw("PATCH", path+"?fieldValidation=Strict", "application/merge-patch+json", `{"spec":{"foo":1}}`)
	if want := `strict decoding error: unknown field "spec"`; got.code != 400 || got.status.Message != want {
		t.Errorf("strict patch: %d %q, want 400 %q", got.code, got.status.Message, want)
	}
}

// TestNotFoundWording: paths the server does not serve answer as kube-apiserver's do.
func TestNotFoundWording(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{
		"/api/v1/foos",
		"/api/v2/pods",
		"/api/v1/namespaces/default/foos/x",
		"/api/v1/namespaces/default/configmaps/x/foo",
		"/api/v1/namespaces/default/namespaces",
		"/apis/apps/v1/foos",
		"/apis/apps/v9/deployments",
	} {
		got := f.raw("GET", path, "", "")
		want := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Message: "the server could not find the requested resource", Reason: metav1.StatusReasonNotFound,
			Details: &metav1.StatusDetails{}, Code: 404}
		if got.code != 404 {
			t.Errorf("%s: code %d, want 404", path, got.code)
		}
		if d := cmp.Diff(want, got.status); d != "" {
			t.Errorf("%s: status (-want +got):\n%s", path, d)
		}
	}
	// Outside the API and its groups: the plain 404 of kube-apiserver's final handler.
	for _, path := range []string{"/apis/foo.example.com/v1/bars", "/apis/foo.example.com", "/nothing"} {
		got := f.raw("GET", path, "", "")
		if got.code != 404 || got.body != "404 page not found\n" {
			t.Errorf("%s: %d %q, want 404 %q", path, got.code, got.body, "404 page not found\n")
		}
	}
}

// TestTooLargeResourceVersion: a read at a resourceVersion the server has not reached
// waits for it briefly, then fails as kube-apiserver's watch cache does.
func TestTooLargeResourceVersion(t *testing.T) {
	f := newFixture(t)
	list, err := f.client.CoreV1().ConfigMaps("default").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := strconv.ParseInt(list.ResourceVersion, 10, 64)
	future := cur + 1000
	for _, path := range []string{
		fmt.Sprintf("/api/v1/namespaces/default/configmaps?resourceVersion=%d", future),
		fmt.Sprintf("/api/v1/namespaces/default/configmaps?resourceVersion=%d&resourceVersionMatch=Exact", future),
		fmt.Sprintf("/api/v1/namespaces/default?resourceVersion=%d", future),
	} {
		got := f.raw("GET", path, "", "")
		want := fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", future, cur)
		if got.code != http.StatusGatewayTimeout || got.status.Reason != metav1.StatusReasonTimeout || got.status.Message != want {
			t.Errorf("%s: %d %s %q, want 504 Timeout %q", path, got.code, got.status.Reason, got.status.Message, want)
		}
		if got.header.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1", path, got.header.Get("Retry-After"))
		}
		if d := got.status.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Type != metav1.CauseTypeResourceVersionTooLarge {
			t.Errorf("%s: details %+v, want a ResourceVersionTooLarge cause", path, d)
		}
	}

	// A watch asking for initial events at least that new is accepted and ends with
	// the same error as its ERROR event.
	got := f.raw("GET", fmt.Sprintf("/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&resourceVersion=%d", future), "", "")
	if got.code != 200 {
		t.Fatalf("watch with initial events from the future: %d %s", got.code, got.body)
	}
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal([]byte(got.body), &ev); err != nil || ev.Type != "ERROR" || ev.Object.Code != http.StatusGatewayTimeout {
		t.Errorf("watch with initial events from the future: %q (%v), want one ERROR event with 504", got.body, err)
	}

	// A revision reached while the read waits is served.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("late", nil), metav1.CreateOptions{})
	}()
	got = f.raw("GET", fmt.Sprintf("/api/v1/namespaces/default/configmaps?resourceVersion=%d", cur+1), "", "")
	if got.code != 200 || !strings.Contains(got.body, `"late"`) {
		t.Errorf("list at the next revision: %d %s, want the list with the late configmap", got.code, got.body)
	}
}

// TestWatchCompactedIsErrorEvent: a watch from a revision storage compacted is accepted
// (200) and sends one ERROR event with 410 Expired, as kube-apiserver's does.
func TestWatchCompactedIsErrorEvent(t *testing.T) {
	t.Run("cache running", func(t *testing.T) { testWatchCompacted(t, true) })
	t.Run("cache starting", func(t *testing.T) { testWatchCompacted(t, false) })
}

func testWatchCompacted(t *testing.T, startCache bool) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	base, err := cms.List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// With startCache, the watch cache starts at base, so that the compacted revision is
	// still in its ring; without, the watch starts it.
	if startCache {
		w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
	}
	var last string
	for i := 0; i < 3; i++ {
		cm, err := cms.Create(f.ctx, makeConfigMap(fmt.Sprintf("c%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = cm.ResourceVersion
	}
	rev, _ := strconv.ParseInt(last, 10, 64)
	if err := f.store.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(f.ctx, "GET", f.srv.URL+"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion="+base.ResourceVersion, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("watch from a compacted revision: %d, want 200", resp.StatusCode)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatal(err)
	}
	// Compaction at rev keeps rev: a watch can still start from rev-1.
	want := fmt.Sprintf("too old resource version: %s (%d)", base.ResourceVersion, rev-1)
	if ev.Type != "ERROR" || ev.Object.Code != http.StatusGone || ev.Object.Reason != metav1.StatusReasonExpired || ev.Object.Message != want {
		t.Errorf("event %s, want ERROR 410 Expired %q", line, want)
	}
}
