package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/storage/memory"
)

// doublingCopies is the attack of issue 16: n JSON patch copies of /data into itself,
// each doubling the object.
func doublingCopies(n int) []byte {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/c%d"}`, i)
	}
	return []byte("[" + strings.Join(ops, ",") + "]")
}

// nested is a merge patch of data nested depth objects deep.
func nested(depth int) []byte {
	return []byte(`{"data":` + strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth) + `}`)
}

func TestPatchCostBounds(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	big := strings.Repeat("x", 2<<20)
	for _, cm := range []*v1.ConfigMap{
		makeConfigMap("small", func(cm *v1.ConfigMap) { cm.Data["k"] = strings.Repeat("v", 4096) }),
		makeConfigMap("big", func(cm *v1.ConfigMap) { cm.Data["k"] = big }),
	} {
		if _, err := cms.Create(f.ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	if _, err := f.client.AppsV1().Deployments("default").Create(f.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	manyTests := func(n int) []byte {
		ops := make([]string, n)
		for i := range ops {
			ops[i] = `{"op":"test","path":"/metadata/name","value":"small"}`
		}
		return []byte("[" + strings.Join(ops, ",") + "]")
	}
	cases := []struct {
		name, cm string
		pt       types.PatchType
		patch    []byte
		code     int32
		reason   metav1.StatusReason
		message  string // a part of the Status message
	}{
		{"17 doubling copies", "small", types.JSONPatchType, doublingCopies(17),
			422, metav1.StatusReasonInvalid, "exceeding the limit 3145728"},
		{"10001 operations", "small", types.JSONPatchType, manyTests(10001),
			413, metav1.StatusReasonRequestEntityTooLarge, "The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{"result over the body limit", "big", types.JSONPatchType, []byte(`[{"op":"copy","from":"/data/k","path":"/data/k2"}]`),
			413, metav1.StatusReasonRequestEntityTooLarge, "the patched object is 4194"},
		{"merge patch nested too deep", "small", types.MergePatchType, nested(10001),
			400, metav1.StatusReasonBadRequest, "exceeded max depth"},
		{"strategic merge patch nested too deep", "small", types.StrategicMergePatchType, nested(10001),
			400, metav1.StatusReasonBadRequest, "exceeded max depth"},
		{"merge patch body over 3 MiB", "small", types.MergePatchType, []byte(`{"data":{"k":"` + strings.Repeat("y", 3<<20) + `"}}`),
			413, metav1.StatusReasonRequestEntityTooLarge, "limit is 3145728"},
		{"10001 operations on the scale subresource", "", types.JSONPatchType, manyTests(10001),
			413, metav1.StatusReasonRequestEntityTooLarge, "The allowed maximum operations in a JSON patch is 10000, got 10001"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.cm == "" {
				_, err = f.client.AppsV1().Deployments("default").Patch(f.ctx, "d", tc.pt, tc.patch, metav1.PatchOptions{}, "scale")
			} else {
				_, err = cms.Patch(f.ctx, tc.cm, tc.pt, tc.patch, metav1.PatchOptions{})
			}
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("want a %d Status, got %v", tc.code, err)
			}
			got := st.Status()
			if got.Code != tc.code || got.Reason != tc.reason || !strings.Contains(got.Message, tc.message) {
				t.Fatalf("want %d %s with %q, got %d %s %q", tc.code, tc.reason, tc.message, got.Code, got.Reason, got.Message)
			}
		})
	}
	t.Run("at the bounds still applies", func(t *testing.T) {
		if _, err := cms.Patch(f.ctx, "small", types.JSONPatchType, manyTests(10000), metav1.PatchOptions{}); err != nil {
			t.Fatalf("10000 operations: %v", err)
		}
		got, err := cms.Patch(f.ctx, "small", types.JSONPatchType, doublingCopies(3), metav1.PatchOptions{})
		if err == nil {
			t.Fatalf("copies of /data into a ConfigMap's data decoded: %v", got.Data)
		}
		if strings.Contains(err.Error(), "exceeding the limit") {
			t.Fatalf("3 copies of 4 KiB hit the copy bound: %v", err)
		}
		got, err = cms.Patch(f.ctx, "small", types.JSONPatchType, []byte(`[{"op":"copy","from":"/data/k","path":"/data/k2"}]`), metav1.PatchOptions{})
		if err != nil || got.Data["k2"] != got.Data["k"] {
			t.Fatalf("one copy: %v", err)
		}
		if _, err := cms.Patch(f.ctx, "small", types.MergePatchType, nested(100), metav1.PatchOptions{}); apierrors.IsBadRequest(err) && strings.Contains(err.Error(), "depth") {
			t.Fatalf("100 levels refused for depth: %v", err)
		}
	})
	// The refused patches left the objects as they were.
	got, err := cms.Get(f.ctx, "big", metav1.GetOptions{})
	if err != nil || len(got.Data) != 1 || got.Data["k"] != big {
		t.Fatalf("big after refused patches: %d keys, %v", len(got.Data), err)
	}
}

// blocking serves extra subresources that hold a request until released when it asks
// for ?block, and answer at once otherwise.
type blocking struct {
	entered chan string
	release chan struct{}
}

func (b *blocking) handler(_ context.Context, w http.ResponseWriter, r *http.Request, req Request) error {
	if r.URL.Query().Has("block") {
		b.entered <- req.Verb
		<-b.release
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func TestInFlightLimits(t *testing.T) {
	b := &blocking{entered: make(chan string), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(),
		MaxRequestsInFlight: 1, MaxMutatingRequestsInFlight: 1, Metrics: reg,
		InFlightExempt: func(r *http.Request) bool { return r.Header.Get("X-Test-Masters") != "" },
		Extra:          map[string]SubresourceHandler{"configmaps/block": b.handler, "configmaps/log": b.handler},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	defer func() {
		select {
		case <-b.release:
		default:
			close(b.release)
		}
	}()
	base := srv.URL + "/api/v1/namespaces/default/configmaps/x/"
	send := func(method, path string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, bytes.NewReader(nil))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	gauge := func(kind string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "apiserver_current_inflight_requests" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == kind {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no apiserver_current_inflight_requests{request_kind=%q}", kind)
		return 0
	}
	want429 := func(resp *http.Response) {
		t.Helper()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("want 429 with Retry-After: 1, got %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		body, _ := io.ReadAll(resp.Body)
		var st metav1.Status
		if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Reason != metav1.StatusReasonTooManyRequests ||
			st.Message != "Too many requests, please try again later." || st.Details == nil || st.Details.RetryAfterSeconds != 1 {
			t.Fatalf("429 body: %s", body)
		}
	}

	// One read-only and one mutating request fill both limits.
	held := make(chan int, 2)
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		go func() {
			req, _ := http.NewRequest(method, base+"block?block=1", nil)
			resp, err := srv.Client().Do(req)
			if err != nil {
				held <- 0
				return
			}
			_ = resp.Body.Close()
			held <- resp.StatusCode
		}()
		<-b.entered
	}
	if gauge("readOnly") != 1 || gauge("mutating") != 1 {
		t.Fatalf("gauges while full: readOnly %v, mutating %v", gauge("readOnly"), gauge("mutating"))
	}
	want429(send(http.MethodGet, "block"))
	want429(send(http.MethodPut, "block"))
	if resp := send(http.MethodGet, "log"); resp.StatusCode != http.StatusOK {
		t.Fatalf("long-running log while full: %d", resp.StatusCode)
	}
	if resp := send(http.MethodGet, "block", "X-Test-Masters", "1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("exempt request while full: %d", resp.StatusCode)
	}

	close(b.release)
	for range 2 {
		if code := <-held; code != http.StatusOK {
			t.Fatalf("held request: %d", code)
		}
	}
	if resp := send(http.MethodGet, "block"); resp.StatusCode != http.StatusOK {
		t.Fatalf("read-only after release: %d", resp.StatusCode)
	}
	if resp := send(http.MethodPut, "block"); resp.StatusCode != http.StatusOK {
		t.Fatalf("mutating after release: %d", resp.StatusCode)
	}
	if gauge("readOnly") != 0 || gauge("mutating") != 0 {
		t.Fatalf("gauges after release: readOnly %v, mutating %v", gauge("readOnly"), gauge("mutating"))
	}
}

// TestInFlightKinds checks which requests count against which limit, with both full:
// long-running ones (kube-apiserver's BasicLongRunningRequestCheck) are served anyway.
func TestInFlightKinds(t *testing.T) {
	l, err := newInFlight(1, 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.readOnly <- struct{}{}
	l.mutating <- struct{}{}
	res := func(verb, sub string) Request {
		return Request{Verb: verb, Resource: "pods", Subresource: sub, Name: "p", IsResourceRequest: true}
	}
	cases := []struct {
		name   string
		req    Request
		served bool
	}{
		{"get", res("get", ""), false},
		{"list", res("list", ""), false},
		{"create", res("create", ""), false},
		{"patch status", res("patch", "status"), false},
		{"deletecollection", res("deletecollection", ""), false},
		{"discovery", Request{Verb: "get", Path: "/api"}, false},
		{"non-resource post", Request{Verb: "post", Path: "/apis/x"}, false},
		{"watch", res("watch", ""), true},
		{"proxy verb", res("proxy", ""), true},
		{"log", res("get", "log"), true},
		{"exec", res("create", "exec"), true},
		{"attach", res("get", "attach"), true},
		{"portforward", res("create", "portforward"), true},
		{"pod proxy", res("get", "proxy"), true},
		{"log of a non-resource path", Request{Verb: "get", Path: "/log", Subresource: "log"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			done, ok := l.start(w, httptest.NewRequest(http.MethodGet, "/", nil), tc.req)
			if ok != tc.served {
				t.Fatalf("served %v, want %v (answer %d)", ok, tc.served, w.Code)
			}
			if ok {
				done()
			} else if w.Code != http.StatusTooManyRequests {
				t.Fatalf("refused with %d", w.Code)
			}
		})
	}
}

func TestInFlightNoLimit(t *testing.T) {
	if _, err := New(Config{Storage: memory.New(time.Second), Resources: testResources(), MaxRequestsInFlight: -1}); err == nil {
		t.Fatal("a negative limit was accepted")
	}
	l, err := newInFlight(0, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if _, ok := l.start(httptest.NewRecorder(), nil, Request{Verb: "get"}); !ok {
			t.Fatal("0 limited requests")
		}
	}
}
