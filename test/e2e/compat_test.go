package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The tests of this file check that tranche answers as kube-apiserver does where
// kubectl, Helm and client-go notice (issue 16).

// rawGet does a GET on s with the admin's credentials and the given Accept header.
func rawGet(t *testing.T, s *server, path, accept string) (*http.Response, []byte) {
	t.Helper()
	cfg := s.restConfig(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestCompatApplyList: `kubectl apply -f` of a List (what `kubectl get -o yaml` writes
// for several objects) makes kubectl read /openapi/v2 in protobuf; it creates the
// items, and applying the same file again changes nothing.
func TestCompatApplyList(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	list := `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: one
  data:
    a: "1"
- apiVersion: v1
  kind: ConfigMap
  metadata:
    name: two
  data:
    b: "2"
`
	out, errOut, err := s.kubectl(t, list, "-n", ns, "apply", "-f", "-")
	if err != nil || out != "configmap/one created\nconfigmap/two created\n" {
		t.Fatalf("first apply: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	out, errOut, err = s.kubectl(t, list, "-n", ns, "apply", "-f", "-")
	if err != nil || out != "configmap/one unchanged\nconfigmap/two unchanged\n" {
		t.Fatalf("second apply: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
}

// TestCompatOpenAPIContentType: the OpenAPI documents in protobuf, asked for as
// client-go asks, come with a Content-Type Go's mime parser (and so client-go) accepts.
func TestCompatOpenAPIContentType(t *testing.T) {
	s := shared
	dc, err := discovery.NewDiscoveryClientForConfig(s.restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.OpenAPISchema(); err != nil {
		t.Fatalf("client-go's OpenAPISchema (v2, protobuf): %v", err)
	}
	for _, tc := range []struct{ path, accept, want string }{
		{"/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"},
		{"/openapi/v3/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"},
		{"/openapi/v2", "", "application/json"},
	} {
		resp, body := rawGet(t, s, tc.path, tc.accept)
		ct := resp.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if resp.StatusCode != 200 || err != nil || mt != tc.want || len(body) == 0 {
			t.Errorf("%s (Accept %q): %d, Content-Type %q (%v), want 200 %q", tc.path, tc.accept, resp.StatusCode, ct, err, tc.want)
		}
	}
	if out := s.must(t, "get", "--raw", "/openapi/v2"); !strings.Contains(out, `"swagger":"2.0"`) {
		t.Errorf("kubectl get --raw /openapi/v2: %.200s", out)
	}
}

// TestCompatUnknownFieldWarning: kubectl's --validate=warn sends fieldValidation=Warn
// and prints the server's warning; its default (strict) gets kube-apiserver's refusal.
func TestCompatUnknownFieldWarning(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unknown\ndata:\n  a: \"1\"\nfoo: bar\n"
	out, errOut, err := s.kubectl(t, cm, "-n", ns, "apply", "--validate=warn", "-f", "-")
	if err != nil || out != "configmap/unknown created\n" || !strings.Contains(errOut, `Warning: unknown field "foo"`) {
		t.Errorf("apply --validate=warn: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	_, errOut, err = s.kubectl(t, strings.Replace(cm, "name: unknown", "name: strict", 1), "-n", ns, "apply", "-f", "-")
	want := `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "foo"`
	if err == nil || !strings.Contains(errOut, want) {
		t.Errorf("apply (strict): %v\nstderr: %s\nwant it to contain %s", err, errOut, want)
	}
}

// TestCompatStatefulSetClaimTemplateTypes: a StatefulSet whose volumeClaimTemplates
// carry apiVersion and kind (bitnami's charts) applies again without error or change,
// and is served with them, as kube-apiserver serves it.
func TestCompatStatefulSetClaimTemplateTypes(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	sts := `apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  serviceName: db
  replicas: 0
  selector:
    matchLabels:
      app: db
  template:
    metadata:
      labels:
        app: db
    spec:
      containers:
      - name: db
        image: postgres:16
  volumeClaimTemplates:
  - apiVersion: v1
    kind: PersistentVolumeClaim
    metadata:
      name: data
    spec:
      accessModes: ["ReadWriteOnce"]
      resources:
        requests:
          storage: 1Gi
`
	if out, errOut, err := s.kubectl(t, sts, "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatalf("first apply: %v\n%s%s", err, out, errOut)
	}
	gen := s.must(t, "-n", ns, "get", "sts", "db", "-o", "jsonpath={.metadata.generation}")
	if out, errOut, err := s.kubectl(t, sts, "-n", ns, "apply", "-f", "-"); err != nil {
		t.Fatalf("second apply: %v\n%s%s", err, out, errOut)
	}
	got := s.must(t, "-n", ns, "get", "sts", "db", "-o", "jsonpath={.metadata.generation} {.spec.volumeClaimTemplates[0].apiVersion} {.spec.volumeClaimTemplates[0].kind}")
	if want := gen + " v1 PersistentVolumeClaim"; got != want {
		t.Errorf("after the second apply: %q, want %q", got, want)
	}
	if out, errOut, err := s.kubectl(t, sts, "-n", ns, "diff", "-f", "-"); err != nil {
		t.Errorf("kubectl diff after apply: %v\n%s%s", err, out, errOut)
	}
}

// TestCompatNotFound: a resource the server does not serve is kube-apiserver's 404.
func TestCompatNotFound(t *testing.T) {
	s := shared
	for _, path := range []string{"/api/v1/foos", "/apis/apps/v1/foos", "/apis/apps/v2/deployments", "/api/v1/namespaces/default/configmaps/x/foo", "/apis/foo.example.com/v1/bars"} {
		_, errOut, err := s.kubectl(t, "", "get", "--raw", path)
		if want := "Error from server (NotFound): the server could not find the requested resource"; err == nil || !strings.Contains(errOut, want) {
			t.Errorf("kubectl get --raw %s: %v %q, want %q", path, err, errOut, want)
		}
	}
	resp, body := rawGet(t, s, "/api/v1/foos", "")
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil || resp.StatusCode != 404 || st.Reason != metav1.StatusReasonNotFound ||
		st.Message != "the server could not find the requested resource" || !strings.Contains(string(body), `"details":{}`) {
		t.Errorf("GET /api/v1/foos: %d %s", resp.StatusCode, body)
	}
}

// errorRecorder wraps a ListerWatcher: its first list answers with a given (stale)
// list, and it records the ERROR events its watches deliver.
type errorRecorder struct {
	cache.ListerWatcher
	mu     sync.Mutex
	stale  runtime.Object
	errors []metav1.Status
}

func (r *errorRecorder) List(opts metav1.ListOptions) (runtime.Object, error) {
	r.mu.Lock()
	stale := r.stale
	r.stale = nil
	r.mu.Unlock()
	if stale != nil {
		return stale, nil
	}
	return r.ListerWatcher.List(opts)
}

func (r *errorRecorder) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	w, err := r.ListerWatcher.Watch(opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if st, ok := ev.Object.(*metav1.Status); ok && ev.Type == watch.Error {
			r.mu.Lock()
			r.errors = append(r.errors, *st)
			r.mu.Unlock()
		}
		return ev, true
	}), nil
}

// IsWatchListSemanticsUnSupported makes the reflector list then watch (the path whose
// first watch starts at the stale list's revision) rather than stream its initial list.
func (r *errorRecorder) IsWatchListSemanticsUnSupported() bool { return true }

func (r *errorRecorder) seen() []metav1.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metav1.Status(nil), r.errors...)
}

// TestCompatWatchCompacted runs its own server compacting every second: a watch from a
// compacted resourceVersion is answered 200 with one ERROR event (410 Expired, "too old
// resource version"), and a client-go informer whose watch starts there relists.
func TestCompatWatchCompacted(t *testing.T) {
	s, err := startServer([]string{"--compact-interval", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop(); _ = os.RemoveAll(s.dataDir) })
	c := s.client(t)
	ctx := context.Background()
	const ns = "compacted"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := c.CoreV1().ConfigMaps(ns)
	stale, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/v1/namespaces/" + ns + "/configmaps?watch=true&resourceVersion=" + stale.ResourceVersion
	tooOld := regexp.MustCompile(`^too old resource version: ` + stale.ResourceVersion + ` \([0-9]+\)$`)
	eventually(t, 30*time.Second, "a raw watch from the compacted revision gets an ERROR event", func() (bool, string) {
		cfg := s.restConfig(t)
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return false, err.Error()
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return false, fmt.Sprintf("HTTP %d", resp.StatusCode)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil {
			return false, "no event: " + err.Error()
		}
		var ev struct {
			Type   string        `json:"type"`
			Object metav1.Status `json:"object"`
		}
		_ = json.Unmarshal([]byte(line), &ev)
		ok := ev.Type == "ERROR" && ev.Object.Code == http.StatusGone && ev.Object.Reason == metav1.StatusReasonExpired &&
			tooOld.MatchString(ev.Object.Message)
		return ok, line
	})

	// An informer whose first list is the stale one watches from the compacted
	// revision, sees the ERROR event, relists and holds every configmap.
	rec := &errorRecorder{ListerWatcher: cache.NewListWatchFromClient(c.CoreV1().RESTClient(), "configmaps", ns, fields.Everything()), stale: stale}
	inf := cache.NewSharedIndexInformer(rec, &v1.ConfigMap{}, 0, cache.Indexers{})
	ictx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go inf.Run(ictx.Done())
	eventually(t, 30*time.Second, "the informer relists after the ERROR event", func() (bool, string) {
		errs := rec.seen()
		keys := inf.GetStore().ListKeys()
		expired := len(errs) > 0 && errs[0].Code == http.StatusGone
		return expired && len(keys) == 4, fmt.Sprintf("errors %v, keys %v", errs, keys) // c0..c2 and kube-root-ca.crt
	})
}
