package apiserver

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/storage/memory"
)

// testEphemeralStrategy stands in for the pod registry's ephemeralcontainers strategy:
// only spec.ephemeralContainers is written, and a container named "bad" is refused.
func testEphemeralStrategy() *registry.SubresourceStrategy {
	return &registry.SubresourceStrategy{
		PrepareForUpdate: func(obj, old runtime.Object) {
			pod, kept := obj.(*v1.Pod), old.(*v1.Pod).DeepCopy()
			kept.ResourceVersion = pod.ResourceVersion
			kept.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
			*pod = *kept
		},
		ValidateUpdate: func(obj, _ runtime.Object) field.ErrorList {
			for i, ec := range obj.(*v1.Pod).Spec.EphemeralContainers {
				if ec.Name == "bad" {
					return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers").Index(i), "is bad")}
				}
			}
			return nil
		},
	}
}

// TestPartSubresource: a subresource of registry.Resource.Subresources shows the whole
// object and writes only its part, through PUT, strategic merge and JSON patches, with
// the strategy's validation and the subresource named to validators.
func TestPartSubresource(t *testing.T) {
	val := &recordingValidator{}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Validators: []Validator{val}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("default")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	got := &v1.Pod{}
	if err := client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("p").SubResource("ephemeralcontainers").Do(ctx).Into(got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "p" || got.ResourceVersion != created.ResourceVersion {
		t.Fatalf("GET ephemeralcontainers: got %s at %s, want the pod at %s", got.Name, got.ResourceVersion, created.ResourceVersion)
	}

	// PUT: everything but spec.ephemeralContainers is ignored.
	put := created.DeepCopy()
	put.Labels["a"] = "changed"
	put.Spec.Containers[0].Image = "nginx"
	put.Status.Phase = v1.PodFailed
	put.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "one", Image: "busybox"}}}
	updated, err := pods.UpdateEphemeralContainers(ctx, "p", put, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Labels["a"] != "b" || updated.Spec.Containers[0].Image != "busybox" || updated.Status.Phase != v1.PodPending {
		t.Errorf("the subresource wrote more than its part: labels %v, image %s, phase %s",
			updated.Labels, updated.Spec.Containers[0].Image, updated.Status.Phase)
	}

	// A strategic merge patch made as kubectl debug makes it, from the pod and the pod
	// with one more ephemeral container.
	before, _ := json.Marshal(updated)
	withTwo := updated.DeepCopy()
	withTwo.Spec.EphemeralContainers = append(withTwo.Spec.EphemeralContainers,
		v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "two", Image: "busybox"}})
	after, _ := json.Marshal(withTwo)
	smp, err := strategicpatch.CreateTwoWayMergePatch(before, after, &v1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctx, "p", types.StrategicMergePatchType, smp, metav1.PatchOptions{}, "ephemeralcontainers"); err != nil {
		t.Fatal(err)
	}
	jp := `[{"op":"add","path":"/spec/ephemeralContainers/-","value":{"name":"three","image":"busybox"}}]`
	if _, err := pods.Patch(ctx, "p", types.JSONPatchType, []byte(jp), metav1.PatchOptions{}, "ephemeralcontainers"); err != nil {
		t.Fatal(err)
	}
	bad := `{"spec":{"ephemeralContainers":[{"name":"bad","image":"busybox"}]}}`
	_, err = pods.Patch(ctx, "p", types.StrategicMergePatchType, []byte(bad), metav1.PatchOptions{}, "ephemeralcontainers")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "Forbidden: is bad") {
		t.Fatalf("refused patch: got %v", err)
	}
	final, err := pods.Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ec := range final.Spec.EphemeralContainers {
		names = append(names, ec.Name)
	}
	if d := cmp.Diff([]string{"one", "two", "three"}, names); d != "" {
		t.Errorf("ephemeral containers (-want +got):\n%s", d)
	}
	want := []string{
		"create namespaces/ /default",
		"create pods/ default/p",
		"update pods/ephemeralcontainers default/p",
		"update pods/ephemeralcontainers default/p",
		"update pods/ephemeralcontainers default/p",
	}
	if d := cmp.Diff(want, val.seen); d != "" {
		t.Errorf("validated requests (-want +got):\n%s", d)
	}
	if _, err := pods.Patch(ctx, "p", types.StrategicMergePatchType, smp, metav1.PatchOptions{}, "nosuchthing"); !apierrors.IsNotFound(err) {
		t.Errorf("unknown subresource: got %v, want NotFound", err)
	}
}

// recordingMutator records what it is asked and labels every pod it may change.
type recordingMutator struct {
	mu   sync.Mutex
	seen []string
}

func (m *recordingMutator) Mutate(_ context.Context, req *AdmissionRequest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := map[AdmitOp]string{AdmitCreate: "create", AdmitUpdate: "update"}[req.Operation]
	old := ""
	if req.OldObject != nil {
		old = " old=" + req.OldObject.(interface{ GetResourceVersion() string }).GetResourceVersion()
	}
	m.seen = append(m.seen, op+" "+req.Resource.Resource+"/"+req.Subresource+" "+req.Namespace+"/"+req.Name+old)
	if pod, ok := req.Object.(*v1.Pod); ok && req.Subresource == "" {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		pod.Labels["mutated"] = req.Name
		if pod.Annotations["poison"] != "" {
			pod.Labels["mutated"] = "not a valid label value!"
		}
	}
	return nil
}

// TestMutators: mutators see creates and updates of objects and subresources before
// the strategy, so their changes are stored and validated like the client's.
func TestMutators(t *testing.T) {
	mut := &recordingMutator{}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Mutators: []Mutator{mut}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("default")
	created, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Labels["mutated"] != created.Name {
		t.Errorf("created pod labels %v, want mutated=%s", created.Labels, created.Name)
	}
	if _, err := pods.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"poison": "yes"}}})
	_, err = pods.Patch(ctx, created.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.labels: Invalid value") {
		t.Fatalf("a mutation the strategy refuses: got %v, want Invalid on metadata.labels", err)
	}
	rv := created.ResourceVersion
	want := []string{
		"create namespaces/ /default",
		"create pods/ default/" + created.Name,
		"update pods/status default/" + created.Name + " old=" + rv,
		"update pods/ default/" + created.Name + " old=" + rv,
	}
	if d := cmp.Diff(want, mut.seen); d != "" {
		t.Errorf("mutated requests (-want +got):\n%s", d)
	}
}
