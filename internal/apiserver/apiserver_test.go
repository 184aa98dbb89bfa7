package apiserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage/memory"
)

// testResources are small stand-ins for the real registries, enough to exercise every
// generic path (status, scale, generation, field selectors, validation).
func testResources() []registry.Resource {
	return []registry.Resource{
		{
			GVK: v1.SchemeGroupVersion.WithKind("Namespace"), Plural: "namespaces", Singular: "namespace",
			New: func() runtime.Object { return &v1.Namespace{} }, NewList: func() runtime.Object { return &v1.NamespaceList{} },
			Default: func(obj runtime.Object) {
				ns := obj.(*v1.Namespace)
				if ns.CreationTimestamp.IsZero() || len(ns.Spec.Finalizers) == 0 && ns.DeletionTimestamp == nil && ns.ResourceVersion == "" {
					ns.Spec.Finalizers = []v1.FinalizerName{v1.FinalizerKubernetes}
				}
			},
			Status:   &registry.StatusStrategy{},
			Handlers: core.NamespaceHandlers(),
			Delete:   core.NamespaceDeleteStrategy(),
		},
		{
			GVK: v1.SchemeGroupVersion.WithKind("ConfigMap"), Plural: "configmaps", Singular: "configmap", Namespaced: true,
			New: func() runtime.Object { return &v1.ConfigMap{} }, NewList: func() runtime.Object { return &v1.ConfigMapList{} },
			Validate: func(obj runtime.Object) field.ErrorList {
				cm := obj.(*v1.ConfigMap)
				if _, bad := cm.Data["bad"]; bad {
					return field.ErrorList{field.Invalid(field.NewPath("data").Key("bad"), cm.Data["bad"], "must not be set")}
				}
				return nil
			},
			Columns: []metav1.TableColumnDefinition{registry.NameColumn, {Name: "Data", Type: "integer"}, registry.AgeColumn},
			Row: func(obj runtime.Object, now time.Time) []interface{} {
				cm := obj.(*v1.ConfigMap)
				return []interface{}{cm.Name, int64(len(cm.Data)), registry.HumanAge(cm.CreationTimestamp, now)}
			},
		},
		{
			GVK: v1.SchemeGroupVersion.WithKind("Pod"), Plural: "pods", Singular: "pod", Namespaced: true,
			New: func() runtime.Object { return &v1.Pod{} }, NewList: func() runtime.Object { return &v1.PodList{} },
			PrepareForCreate: func(obj runtime.Object) { obj.(*v1.Pod).Status = v1.PodStatus{Phase: v1.PodPending} },
			Status:           &registry.StatusStrategy{},
			Subresources:     map[string]*registry.SubresourceStrategy{"ephemeralcontainers": testEphemeralStrategy()},
			Handlers:         core.PodHandlers(),
			Delete:           core.PodDeleteStrategy(),
			Fields: func(obj runtime.Object) fields.Set {
				p := obj.(*v1.Pod)
				return fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}
			},
		},
		{
			GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Plural: "deployments", Singular: "deployment", Namespaced: true,
			New: func() runtime.Object { return &appsv1.Deployment{} }, NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
			TrackGeneration: true,
			Status:          &registry.StatusStrategy{},
			Scale: &registry.ScaleStrategy{
				Get: func(obj runtime.Object) (int32, int32, string) {
					d := obj.(*appsv1.Deployment)
					return ptr.Deref(d.Spec.Replicas, 1), d.Status.Replicas, "app=x"
				},
				Set: func(obj runtime.Object, n int32) { obj.(*appsv1.Deployment).Spec.Replicas = &n },
			},
		},
	}
}

type fixture struct {
	t      *testing.T
	store  *memory.Store
	srv    *httptest.Server
	client kubernetes.Interface
	ctx    context.Context
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOf(t, testResources())
}

// newFixtureOf is newFixture serving resources.
func newFixtureOf(t *testing.T, resources []registry.Resource) *fixture {
	t.Helper()
	store := memory.New(50 * time.Millisecond)
	api, err := New(Config{Storage: store, Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, store: store, srv: srv, client: client, ctx: ctx}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func makeConfigMap(name string, mutate func(*v1.ConfigMap)) *v1.ConfigMap {
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if mutate != nil {
		mutate(cm)
	}
	return cm
}

func TestCreateGetUpdateConflict(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	created, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("server did not fill metadata: %+v", created.ObjectMeta)
	}
	if _, err := cms.Create(f.ctx, makeConfigMap("a", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: want AlreadyExists, got %v", err)
	}
	got, err := cms.Get(f.ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(created, got); diff != "" {
		t.Fatalf("get differs from create (-create +get):\n%s", diff)
	}
	got.Data["k"] = "w"
	updated, err := cms.Update(f.ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == got.ResourceVersion {
		t.Fatal("update kept the resourceVersion")
	}
	_, err = cms.Update(f.ctx, got, metav1.UpdateOptions{}) // stale resourceVersion
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "the object has been modified") {
		t.Fatalf("stale update: want Conflict, got %v", err)
	}
	noop, err := cms.Update(f.ctx, updated, metav1.UpdateOptions{})
	if err != nil || noop.ResourceVersion != updated.ResourceVersion {
		t.Fatalf("no-op update must keep the resourceVersion: %v %s %s", err, noop.ResourceVersion, updated.ResourceVersion)
	}
}

func TestValidationAndBadInput(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	_, err := cms.Create(f.ctx, makeConfigMap("b", func(cm *v1.ConfigMap) { cm.Data["bad"] = "x" }), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `data[bad]: Invalid value: "x": must not be set`) {
		t.Fatalf("want Invalid with field path, got %v", err)
	}
	_, err = cms.Create(f.ctx, makeConfigMap("Bad_Name", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name: Invalid value") {
		t.Fatalf("want invalid name, got %v", err)
	}
	_, err = f.client.CoreV1().ConfigMaps("missing").Create(f.ctx, makeConfigMap("c", func(cm *v1.ConfigMap) { cm.Namespace = "missing" }), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "missing" not found`) {
		t.Fatalf("want namespace not found, got %v", err)
	}
	cases := []struct {
		name, method, path, ctype, body string
		code                            int
		msg                             string
	}{
		{"malformed JSON", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":`, 400, "the object provided is unrecognized"},
		{"wrong kind", "POST", "/api/v1/namespaces/default/configmaps", "application/json", `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"x"}}`, 400, `kind "Secret"`},
		{"unknown field strict", "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict", "application/json", `{"metadata":{"name":"x"},"dta":{}}`, 400, `unknown field "dta"`},
		{"bad media type", "POST", "/api/v1/namespaces/default/configmaps", "text/plain", `x`, 415, "unknown format"},
		{"server-side apply without manager", "PATCH", "/api/v1/namespaces/default/configmaps/x", "application/apply-patch+yaml", `{}`, 422, "fieldManager: Required value: is required for apply patch"},
		{"server-side apply in CBOR", "PATCH", "/api/v1/namespaces/default/configmaps/x?fieldManager=a", "application/apply-patch+cbor", `{}`, 415, "server-side apply in CBOR"},
		{"bad label selector", "GET", "/api/v1/pods?labelSelector=a%3D%3D%3Db", "", "", 400, "unable to parse requirement"},
		{"unsupported field selector", "GET", "/api/v1/pods?fieldSelector=spec.foo%3Dx", "", "", 400, "field label not supported: spec.foo"},
		{"unknown resource", "GET", "/api/v1/widgets", "", "", 404, ""},
		{"bad continue", "GET", "/api/v1/pods?limit=1&continue=zzz", "", "", 400, "invalid continue token"},
		{"empty body", "POST", "/api/v1/namespaces/default/configmaps", "application/json", ``, 400, "empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, f.srv.URL+tc.path, strings.NewReader(tc.body))
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, data)
			}
			var st metav1.Status
			if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Status" {
				t.Fatalf("not a Status: %s", data)
			}
			if !strings.Contains(st.Message, tc.msg) {
				t.Fatalf("message %q does not contain %q", st.Message, tc.msg)
			}
		})
	}
}

func TestPatchKinds(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(f.ctx, makeConfigMap("p", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		pt    types.PatchType
		patch string
		want  map[string]string
	}{
		{"merge", types.MergePatchType, `{"data":{"m":"1"}}`, map[string]string{"k": "v", "m": "1"}},
		{"json", types.JSONPatchType, `[{"op":"remove","path":"/data/k"}]`, map[string]string{"m": "1"}},
		{"strategic", types.StrategicMergePatchType, `{"data":{"s":"2"}}`, map[string]string{"m": "1", "s": "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := cms.Patch(f.ctx, "p", tc.pt, []byte(tc.patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Data); diff != "" {
				t.Fatalf("data (-want +got):\n%s", diff)
			}
		})
	}
	_, err := cms.Patch(f.ctx, "p", types.JSONPatchType, []byte(`[{"op":"test","path":"/data/m","value":"nope"}]`), metav1.PatchOptions{})
	if err == nil || apierrors.ReasonForError(err) != metav1.StatusReasonInvalid {
		t.Fatalf("failed json patch test: want Invalid, got %v", err)
	}
	_, err = cms.Patch(f.ctx, "p", types.MergePatchType, []byte(`{"metadata":{"resourceVersion":"1"}}`), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("patch with a stale resourceVersion: want Conflict, got %v", err)
	}
}

func TestStatusSubresourceAndGeneration(t *testing.T) {
	f := newFixture(t)
	pods := f.client.CoreV1().Pods("default")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning}}
	created, err := pods.Create(f.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Status.Phase != v1.PodPending {
		t.Fatalf("create must reset status, got %s", created.Status.Phase)
	}
	created.Status.Phase = v1.PodRunning
	created.Spec.Containers[0].Image = "nginx"
	st, err := pods.UpdateStatus(f.ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status.Phase != v1.PodRunning || st.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("status write must change status only: phase %s image %s", st.Status.Phase, st.Spec.Containers[0].Image)
	}
	st.Status.Phase = v1.PodFailed
	st.Labels = map[string]string{"x": "y"}
	up, err := pods.Update(f.ctx, st, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if up.Status.Phase != v1.PodRunning || up.Labels["x"] != "y" {
		t.Fatalf("spec write must not change status: %s %v", up.Status.Phase, up.Labels)
	}
	running, err := pods.List(f.ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
	if err != nil || len(running.Items) != 1 {
		t.Fatalf("field selector: %v %d", err, len(running.Items))
	}

	deps := f.client.AppsV1().Deployments("default")
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)}}
	d, err = deps.Create(f.ctx, d, metav1.CreateOptions{})
	if err != nil || d.Generation != 1 {
		t.Fatalf("create: %v generation %d", err, d.Generation)
	}
	d.Labels = map[string]string{"a": "b"}
	d, _ = deps.Update(f.ctx, d, metav1.UpdateOptions{})
	if d.Generation != 1 {
		t.Fatalf("metadata change bumped generation to %d", d.Generation)
	}
	sc, err := deps.GetScale(f.ctx, "d", metav1.GetOptions{})
	if err != nil || sc.Spec.Replicas != 1 {
		t.Fatalf("get scale: %v %+v", err, sc)
	}
	sc.Spec.Replicas = 3
	if _, err := deps.UpdateScale(f.ctx, "d", sc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, _ = deps.Get(f.ctx, "d", metav1.GetOptions{})
	if *d.Spec.Replicas != 3 || d.Generation != 2 {
		t.Fatalf("scale: replicas %d generation %d", *d.Spec.Replicas, d.Generation)
	}
}

func TestListPaging(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if _, err := cms.Create(f.ctx, makeConfigMap(n, func(cm *v1.ConfigMap) {
			cm.Labels = map[string]string{"odd": map[bool]string{true: "yes", false: "no"}[n == "a" || n == "c" || n == "e"]}
		}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	opts := metav1.ListOptions{Limit: 2}
	pages := 0
	for {
		l, err := cms.List(f.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, cm := range l.Items {
			names = append(names, cm.Name)
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, names); diff != "" || pages != 3 {
		t.Fatalf("pages %d, names (-want +got):\n%s", pages, diff)
	}
	odd, err := cms.List(f.ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"odd": "yes"}).String(), Limit: 2})
	if err != nil || len(odd.Items) != 2 || odd.Continue == "" {
		t.Fatalf("selector page: %v %d %q", err, len(odd.Items), odd.Continue)
	}
}

func TestWatchSemantics(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	base, _ := cms.List(f.ctx, metav1.ListOptions{})
	w, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion, LabelSelector: "team=x"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm, _ := cms.Create(f.ctx, makeConfigMap("w", func(cm *v1.ConfigMap) { cm.Labels = map[string]string{"team": "x"} }), metav1.CreateOptions{})
	cm.Data["k"] = "2"
	cm, _ = cms.Update(f.ctx, cm, metav1.UpdateOptions{})
	cm.Labels["team"] = "y"
	if _, err := cms.Update(f.ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []watch.EventType
	for len(got) < 3 {
		select {
		case ev := <-w.ResultChan():
			got = append(got, ev.Type)
		case <-f.ctx.Done():
			t.Fatalf("timed out; events so far %v", got)
		}
	}
	if diff := cmp.Diff([]watch.EventType{watch.Added, watch.Modified, watch.Deleted}, got); diff != "" {
		t.Fatalf("events (-want +got):\n%s", diff)
	}

	// A compacted start revision is 410 Gone, so reflectors relist.
	rev, _ := f.store.Revision(f.ctx)
	if err := f.store.Compact(f.ctx, rev); err != nil {
		t.Fatal(err)
	}
	w2, err := cms.Watch(f.ctx, metav1.ListOptions{ResourceVersion: base.ResourceVersion})
	if err == nil {
		ev := <-w2.ResultChan()
		w2.Stop()
		st, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || st.Code != http.StatusGone {
			t.Fatalf("compacted watch: want ERROR 410, got %v %#v", ev.Type, ev.Object)
		}
	} else if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("compacted watch: want 410, got %v", err)
	}
}

func TestDeletionWithFinalizersAndPropagation(t *testing.T) {
	f := newFixture(t)
	cms := f.client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(f.ctx, makeConfigMap("fin", func(cm *v1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(f.ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(f.ctx, "fin", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("object with a finalizer must stay with a deletionTimestamp: %v", err)
	}
	held.Finalizers = append(held.Finalizers, "example.com/new")
	if _, err := cms.Update(f.ctx, held, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.finalizers: Forbidden: no new finalizers") {
		t.Fatalf("adding a finalizer while deleting: want Invalid, got %v", err)
	}
	if _, err := cms.Patch(f.ctx, "fin", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(f.ctx, "fin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("removing the last finalizer must delete: %v", err)
	}

	for _, tc := range []struct {
		policy metav1.DeletionPropagation
		want   string
	}{{metav1.DeletePropagationForeground, "foregroundDeletion"}, {metav1.DeletePropagationOrphan, "orphan"}} {
		name := strings.ToLower(string(tc.policy))
		if _, err := cms.Create(f.ctx, makeConfigMap(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cms.Delete(f.ctx, name, metav1.DeleteOptions{PropagationPolicy: &tc.policy}); err != nil {
			t.Fatal(err)
		}
		got, err := cms.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil || len(got.Finalizers) != 1 || got.Finalizers[0] != tc.want {
			t.Fatalf("%s: want finalizer %s, got %v (%v)", tc.policy, tc.want, got, err)
		}
	}

	// Namespaces wait for their content; creates in a terminating namespace are refused.
	nss := f.client.CoreV1().Namespaces()
	if _, err := nss.Create(f.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nss.Delete(f.ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := nss.Get(f.ctx, "gone", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != v1.NamespaceTerminating {
		t.Fatalf("namespace must be Terminating: %v %v", err, ns)
	}
	_, err = f.client.CoreV1().ConfigMaps("gone").Create(f.ctx, makeConfigMap("x", func(cm *v1.ConfigMap) { cm.Namespace = "gone" }), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "because it is being terminated") {
		t.Fatalf("create in terminating namespace: %v", err)
	}
	ns.Spec.Finalizers = nil
	if _, err := nss.Finalize(f.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Get(f.ctx, "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("finalized namespace must be gone: %v", err)
	}
}

func TestPodGracefulDeletion(t *testing.T) {
	f := newFixture(t)
	pods := f.client.CoreV1().Pods("default")
	for _, name := range []string{"unbound", "bound"} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}, TerminationGracePeriodSeconds: ptr.To[int64](30)}}
		if _, err := pods.Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods.Bind(f.ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Bind(f.ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "bound"}, Target: v1.ObjectReference{Kind: "Node", Name: "n2"}}, metav1.CreateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("second binding: want Conflict, got %v", err)
	}
	if err := pods.Delete(f.ctx, "unbound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(f.ctx, "unbound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an unscheduled pod goes at once: %v", err)
	}
	if err := pods.Delete(f.ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(f.ctx, "bound", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil || ptr.Deref(p.DeletionGracePeriodSeconds, -1) != 30 {
		t.Fatalf("a bound pod waits for its node: %v %+v", err, p)
	}
	if err := pods.Delete(f.ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(f.ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the node's confirmation (grace 0) removes the pod: %v", err)
	}
}

func TestTableAndDiscovery(t *testing.T) {
	f := newFixture(t)
	if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("t", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/api/v1/namespaces/default/configmaps", nil)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	if table.Kind != "Table" || len(table.ColumnDefinitions) != 3 || len(table.Rows) != 1 || table.Rows[0].Cells[0] != "t" {
		t.Fatalf("table: %+v", table)
	}
	groups, resources, err := f.client.Discovery().ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 2 {
		t.Fatalf("groups: %d", len(groups))
	}
	found := map[string]bool{}
	for _, rl := range resources {
		for _, r := range rl.APIResources {
			found[rl.GroupVersion+"/"+r.Name] = true
		}
	}
	for _, want := range []string{"v1/pods", "v1/pods/status", "v1/pods/binding", "v1/pods/ephemeralcontainers", "apps/v1/deployments/scale", "v1/namespaces/finalize"} {
		if !found[want] {
			t.Errorf("discovery lacks %s", want)
		}
	}
}

// TestMetadataClient: client-go's metadata client (garbage collector, namespace
// controller) gets PartialObjectMetadata for get, list and watch.
func TestMetadataClient(t *testing.T) {
	f := newFixture(t)
	mc := metadata.NewForConfigOrDie(&rest.Config{Host: f.srv.URL})
	gvr := v1.SchemeGroupVersion.WithResource("configmaps")
	owned := func(cm *v1.ConfigMap) {
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u1"}}
		cm.Finalizers = []string{"example.com/f"}
	}
	if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("m", owned), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := mc.Resource(gvr).Namespace("default").Get(f.ctx, "m", metav1.GetOptions{})
	if err != nil || got.Name != "m" || got.UID == "" || len(got.OwnerReferences) != 1 || len(got.Finalizers) != 1 {
		t.Fatalf("metadata get: %v %+v", err, got)
	}
	list, err := mc.Resource(gvr).List(f.ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("metadata list: %v %+v", err, list)
	}
	w, err := mc.Resource(gvr).Namespace("default").Watch(f.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := f.client.CoreV1().ConfigMaps("default").Create(f.ctx, makeConfigMap("n", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-w.ResultChan()
	pom, ok := ev.Object.(*metav1.PartialObjectMetadata)
	if ev.Type != watch.Added || !ok || pom.Name != "n" {
		t.Fatalf("metadata watch event: %v %#v", ev.Type, ev.Object)
	}
}
