package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage/memory"
)

// applyFixture is an API server with the test resources and Services, reached over HTTP.
type applyFixture struct {
	*fixture
}

func newApplyFixture(t *testing.T) *applyFixture {
	t.Helper()
	resources := append(testResources(), registry.Resource{
		GVK: v1.SchemeGroupVersion.WithKind("Service"), Plural: "services", Singular: "service", Namespaced: true,
		New: func() runtime.Object { return &v1.Service{} }, NewList: func() runtime.Object { return &v1.ServiceList{} },
		Status: &registry.StatusStrategy{},
	})
	store := memory.New(50 * time.Millisecond)
	api, err := New(Config{Storage: store, Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	f := &fixture{t: t, store: store, srv: srv, client: kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL}), ctx: t.Context()}
	if _, err := f.client.CoreV1().Namespaces().Create(f.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &applyFixture{f}
}

// do sends a request and returns its status code and body.
func (f *applyFixture) do(method, path, contentType, body string, header map[string]string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.ctx, method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// apply server-side applies body (YAML) to path as manager.
func (f *applyFixture) apply(path, manager, body string, force bool) (int, string) {
	f.t.Helper()
	q := "?fieldManager=" + manager
	if force {
		q += "&force=true"
	}
	return f.do(http.MethodPatch, path+q, "application/apply-patch+yaml", body, nil)
}

// managers returns manager/operation/subresource → fieldsV1 JSON of an object's managedFields.
func managers(t *testing.T, mf []metav1.ManagedFieldsEntry) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range mf {
		key := e.Manager + "/" + string(e.Operation)
		if e.Subresource != "" {
			key += "/" + e.Subresource
		}
		fields := ""
		if e.FieldsV1 != nil {
			fields = string(e.FieldsV1.Raw)
		}
		out[key] = fields
	}
	return out
}

const cmPath = "/api/v1/namespaces/default/configmaps/"

func TestApplyCreatesThenUpdates(t *testing.T) {
	f := newApplyFixture(t)
	code, body := f.apply(cmPath+"conf", "a", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"1\"\n  z: \"2\"\n", false)
	if code != http.StatusCreated {
		t.Fatalf("apply to a missing object = %d %s, want 201", code, body)
	}
	var created v1.ConfigMap
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/Apply": `{"f:data":{"f:x":{},"f:z":{}}}`}
	if diff := cmp.Diff(want, managers(t, created.ManagedFields)); diff != "" {
		t.Errorf("managedFields after the creating apply (-want +got):\n%s", diff)
	}
	if created.UID == "" || created.ResourceVersion == "" {
		t.Errorf("created object has no uid or resourceVersion: %+v", created.ObjectMeta)
	}

	// The same configuration again changes nothing, not even the resourceVersion.
	code, body = f.apply(cmPath+"conf", "a", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"1\"\n  z: \"2\"\n", false)
	var again v1.ConfigMap
	_ = json.Unmarshal([]byte(body), &again)
	if code != http.StatusOK || again.ResourceVersion != created.ResourceVersion {
		t.Errorf("re-apply = %d, resourceVersion %s; want 200 and %s unchanged", code, again.ResourceVersion, created.ResourceVersion)
	}

	// Applying again without z removes z, which only a managed; x changes.
	code, body = f.apply(cmPath+"conf", "a", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"3\"\n", false)
	if code != http.StatusOK {
		t.Fatalf("second apply = %d %s, want 200", code, body)
	}
	got, err := f.client.CoreV1().ConfigMaps("default").Get(f.ctx, "conf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"x": "3"}, got.Data); diff != "" {
		t.Errorf("data after the second apply (-want +got):\n%s", diff)
	}
	if got.UID != created.UID {
		t.Error("the second apply replaced the object")
	}
}

func TestApplyConflictAndForce(t *testing.T) {
	f := newApplyFixture(t)
	if code, body := f.apply(cmPath+"conf", "a", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"1\"\n", false); code != http.StatusCreated {
		t.Fatalf("apply a = %d %s", code, body)
	}
	bApply := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  x: \"2\"\n"
	code, body := f.apply(cmPath+"conf", "b", bApply, false)
	if code != http.StatusConflict {
		t.Fatalf("conflicting apply = %d %s, want 409", code, body)
	}
	var status metav1.Status
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatal(err)
	}
	if want := `Apply failed with 1 conflict: conflict with "a": .data.x`; status.Message != want || status.Reason != metav1.StatusReasonConflict {
		t.Errorf("conflict = %s %q, want Conflict %q", status.Reason, status.Message, want)
	}
	if status.Details == nil || len(status.Details.Causes) != 1 || status.Details.Causes[0].Field != ".data.x" {
		t.Errorf("conflict causes = %+v, want one naming .data.x", status.Details)
	}

	if code, body := f.apply(cmPath+"conf", "b", bApply, true); code != http.StatusOK {
		t.Fatalf("forced apply = %d %s, want 200", code, body)
	}
	got, err := f.client.CoreV1().ConfigMaps("default").Get(f.ctx, "conf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["x"] != "2" {
		t.Errorf("data.x = %q after the forced apply, want 2", got.Data["x"])
	}
	// The force took x from a, which is left managing nothing and dropped.
	want := map[string]string{"b/Apply": `{"f:data":{"f:x":{}}}`}
	if diff := cmp.Diff(want, managers(t, got.ManagedFields)); diff != "" {
		t.Errorf("managedFields after force (-want +got):\n%s", diff)
	}
}

func TestApplyRequestErrors(t *testing.T) {
	f := newApplyFixture(t)
	tests := []struct {
		name, path, body string
		wantCode         int
		wantMessage      string
	}{
		{name: "no field manager", path: cmPath + "conf", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n",
			wantCode: 422, wantMessage: "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"},
		{name: "name mismatch", path: cmPath + "conf?fieldManager=a", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n",
			wantCode: 400, wantMessage: "the name of the object (other) does not match the name on the URL (conf)"},
		{name: "wrong kind", path: cmPath + "conf?fieldManager=a", body: "apiVersion: v1\nkind: Secret\nmetadata:\n  name: conf\n",
			wantCode: 400, wantMessage: "invalid object type: /v1, Kind=Secret"},
		{name: "unknown field", path: cmPath + "conf?fieldManager=a", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\nspec: {}\n",
			wantCode: 400, wantMessage: ".spec: field not declared in schema"},
		{name: "duplicate field, strict", path: cmPath + "conf?fieldManager=a&fieldValidation=Strict",
			body:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\ndata:\n  k: a\n  k: b\n",
			wantCode: 400, wantMessage: "error strict decoding patch"},
		{name: "duplicate JSON field, strict", path: cmPath + "conf?fieldManager=a&fieldValidation=Strict",
			body:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"conf"},"data":{"k":"a","k":"b"}}`,
			wantCode: 400, wantMessage: `error strict decoding patch: duplicate field "data.k"`},
		{name: "not YAML", path: cmPath + "conf?fieldManager=a", body: "{[",
			wantCode: 400, wantMessage: "error decoding patch"},
		{name: "bad force", path: cmPath + "conf?fieldManager=a&force=maybe", body: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: conf\n",
			wantCode: 400, wantMessage: "invalid value for force"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(http.MethodPatch, tc.path, "application/apply-patch+yaml", tc.body, nil)
			var status metav1.Status
			_ = json.Unmarshal([]byte(body), &status)
			if code != tc.wantCode || !strings.Contains(status.Message, tc.wantMessage) {
				t.Errorf("= %d %q, want %d and a message containing %q", code, status.Message, tc.wantCode, tc.wantMessage)
			}
		})
	}
}

func TestUpdateManagersRecorded(t *testing.T) {
	f := newApplyFixture(t)
	code, body := f.do(http.MethodPost, "/api/v1/namespaces/default/configmaps?fieldManager=creator", "application/json",
		`{"metadata":{"name":"conf"},"data":{"x":"1"}}`, nil)
	if code != http.StatusCreated {
		t.Fatalf("create = %d %s", code, body)
	}
	// No fieldManager: the User-Agent's product names the manager.
	code, body = f.do(http.MethodPatch, cmPath+"conf", "application/merge-patch+json", `{"data":{"y":"2"}}`,
		map[string]string{"User-Agent": "myctl/v1.2.3 (linux/amd64)"})
	if code != http.StatusOK {
		t.Fatalf("patch = %d %s", code, body)
	}
	var got v1.ConfigMap
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"creator/Update": `{"f:data":{".":{},"f:x":{}}}`,
		"myctl/Update":   `{"f:data":{"f:y":{}}}`,
	}
	if diff := cmp.Diff(want, managers(t, got.ManagedFields)); diff != "" {
		t.Errorf("managedFields (-want +got):\n%s", diff)
	}

	// Writing the object back unchanged is a no-op, managedFields included.
	same, _ := json.Marshal(&got)
	code, body = f.do(http.MethodPut, cmPath+"conf", "application/json", string(same), nil)
	var unchanged v1.ConfigMap
	_ = json.Unmarshal([]byte(body), &unchanged)
	if code != http.StatusOK || unchanged.ResourceVersion != got.ResourceVersion {
		t.Errorf("unchanged put = %d, resourceVersion %s; want 200 and %s", code, unchanged.ResourceVersion, got.ResourceVersion)
	}

	// A PUT with managedFields [{}] resets them, as in Kubernetes.
	got.ManagedFields = []metav1.ManagedFieldsEntry{{}}
	data, _ := json.Marshal(&got)
	code, body = f.do(http.MethodPut, cmPath+"conf?fieldManager=resetter", "application/json", string(data), nil)
	if code != http.StatusOK {
		t.Fatalf("put = %d %s", code, body)
	}
	var reset v1.ConfigMap
	_ = json.Unmarshal([]byte(body), &reset)
	if len(reset.ManagedFields) != 0 {
		t.Errorf("managedFields after a reset = %v, want none", managers(t, reset.ManagedFields))
	}

	for _, tc := range []struct{ name, method, path, contentType, body, wantMessage string }{
		{"force on a merge patch", http.MethodPatch, cmPath + "conf?force=true", "application/merge-patch+json", `{}`,
			"force: Forbidden: may not be specified for non-apply patch"},
		{"unprintable manager", http.MethodPost, "/api/v1/namespaces/default/configmaps?fieldManager=a%01b", "application/json",
			`{"metadata":{"name":"c2"}}`, "CreateOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := f.do(tc.method, tc.path, tc.contentType, tc.body, nil)
			var status metav1.Status
			_ = json.Unmarshal([]byte(body), &status)
			if code != http.StatusUnprocessableEntity || !strings.Contains(status.Message, tc.wantMessage) {
				t.Errorf("= %d %s, want 422 containing %q", code, body, tc.wantMessage)
			}
		})
	}
}

// TestApplyServicePortsByPortAndProtocol checks the list-map keys come from the generated
// schemas: two ports with the same number and different protocols are distinct entries,
// each owned on its own, and another manager's port merges in beside them.
func TestApplyServicePortsByPortAndProtocol(t *testing.T) {
	f := newApplyFixture(t)
	const path = "/api/v1/namespaces/default/services/dns"
	code, body := f.apply(path, "a", `apiVersion: v1
kind: Service
metadata:
  name: dns
spec:
  ports:
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: dns-udp, port: 53, protocol: UDP}
`, false)
	if code != http.StatusCreated {
		t.Fatalf("apply a = %d %s", code, body)
	}
	code, body = f.apply(path, "b", `apiVersion: v1
kind: Service
metadata:
  name: dns
spec:
  ports:
  - {name: metrics, port: 9153, protocol: TCP}
`, false)
	if code != http.StatusOK {
		t.Fatalf("apply b = %d %s", code, body)
	}
	var svc v1.Service
	if err := json.Unmarshal([]byte(body), &svc); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range svc.Spec.Ports {
		names = append(names, p.Name+"/"+string(p.Protocol))
	}
	if diff := cmp.Diff([]string{"dns-tcp/TCP", "dns-udp/UDP", "metrics/TCP"}, names); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	a := managers(t, svc.ManagedFields)["a/Apply"]
	for _, key := range []string{`k:{\"port\":53,\"protocol\":\"TCP\"}`, `k:{\"port\":53,\"protocol\":\"UDP\"}`} {
		if !strings.Contains(a, strings.ReplaceAll(key, `\"`, `\"`)) {
			t.Errorf("a's fields %s lack the port entry %s", a, key)
		}
	}
	// a drops the UDP port: only that entry goes.
	code, body = f.apply(path, "a", "apiVersion: v1\nkind: Service\nmetadata:\n  name: dns\nspec:\n  ports:\n  - {name: dns-tcp, port: 53, protocol: TCP}\n", false)
	if code != http.StatusOK {
		t.Fatalf("apply a again = %d %s", code, body)
	}
	svc = v1.Service{}
	_ = json.Unmarshal([]byte(body), &svc)
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Protocol != v1.ProtocolTCP || svc.Spec.Ports[1].Port != 9153 {
		t.Errorf("ports after a dropped UDP = %+v, want 53/TCP and 9153/TCP", svc.Spec.Ports)
	}
}

// TestStatusManagedFields checks a status write has its own manager entry (subresource
// status) and that spec fields in a status apply are reset, not applied.
func TestStatusManagedFields(t *testing.T) {
	f := newApplyFixture(t)
	const path = "/api/v1/namespaces/default/services/web"
	if code, body := f.apply(path, "owner", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - {port: 80}\n  externalName: a\n", false); code != http.StatusCreated {
		t.Fatalf("apply = %d %s", code, body)
	}
	code, body := f.apply(path+"/status", "lb", `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  externalName: changed-by-status
status:
  loadBalancer:
    ingress:
    - ip: 127.0.10.1
`, false)
	if code != http.StatusOK {
		t.Fatalf("status apply = %d %s", code, body)
	}
	var svc v1.Service
	_ = json.Unmarshal([]byte(body), &svc)
	if svc.Spec.ExternalName != "a" {
		t.Errorf("spec.externalName = %q after a status apply, want a", svc.Spec.ExternalName)
	}
	if len(svc.Status.LoadBalancer.Ingress) != 1 {
		t.Errorf("status = %+v, want the applied ingress", svc.Status)
	}
	got := managers(t, svc.ManagedFields)
	if lb, ok := got["lb/Apply/status"]; !ok || strings.Contains(lb, "f:spec") || !strings.Contains(lb, "f:status") {
		t.Errorf("lb's status entry = %q (present %v), want status fields and no spec", lb, ok)
	}
	if _, ok := got["owner/Apply"]; !ok {
		t.Errorf("managers = %v, want owner's entry kept", got)
	}
}

// TestApplyDryRun checks a dry-run apply answers what it would create and stores nothing.
func TestApplyDryRun(t *testing.T) {
	f := newApplyFixture(t)
	code, body := f.do(http.MethodPatch, cmPath+"dry?fieldManager=a&dryRun=All", "application/apply-patch+yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\ndata:\n  x: \"1\"\n", nil)
	var cm v1.ConfigMap
	_ = json.Unmarshal([]byte(body), &cm)
	if code != http.StatusCreated || cm.Data["x"] != "1" || len(cm.ManagedFields) != 1 {
		t.Fatalf("dry-run apply = %d %s, want 201 with the object and its manager", code, body)
	}
	if _, err := f.client.CoreV1().ConfigMaps("default").Get(f.ctx, "dry", metav1.GetOptions{}); err == nil {
		t.Error("a dry-run apply stored the object")
	}
}

// TestScaleRecordsManager checks a scale write makes its writer the manager of
// spec.replicas with subresource scale, so that an applier that set replicas meets a
// conflict afterwards, as in Kubernetes.
func TestScaleRecordsManager(t *testing.T) {
	f := newApplyFixture(t)
	const path = "/apis/apps/v1/namespaces/default/deployments/web"
	deploy := func(replicas string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: " + replicas +
			"\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - {name: web, image: nginx}\n"
	}
	if code, body := f.apply(path, "a", deploy("2"), false); code != http.StatusCreated {
		t.Fatalf("apply = %d %s", code, body)
	}
	code, body := f.do(http.MethodPatch, path+"/scale?fieldManager=scaler", "application/merge-patch+json", `{"spec":{"replicas":5}}`, nil)
	if code != http.StatusOK {
		t.Fatalf("scale = %d %s", code, body)
	}
	d, err := f.client.AppsV1().Deployments("default").Get(f.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(t, d.ManagedFields)["scaler/Update/scale"]; got != `{"f:spec":{"f:replicas":{}}}` {
		t.Errorf("scaler's entry = %q, want spec.replicas (managers %v)", got, managers(t, d.ManagedFields))
	}
	code, body = f.apply(path, "a", deploy("3"), false)
	var status metav1.Status
	_ = json.Unmarshal([]byte(body), &status)
	if want := `conflict with "scaler" with subresource "scale" using apps/v1: .spec.replicas`; code != http.StatusConflict || !strings.Contains(status.Message, want) {
		t.Errorf("apply after scale = %d %q, want 409 containing %q", code, status.Message, want)
	}
}
