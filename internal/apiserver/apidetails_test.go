package apiserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/registry/authorization"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/storage/memory"
)

// TestStatusWriteMetadata: a /status write keeps the labels, annotations, finalizers and
// owner references it carries, as kube-apiserver's status strategies do, except what the
// resource's own strategy keeps from the stored object (a pod's owner references, a
// Deployment's labels); its spec change is still dropped.
func TestStatusWriteMetadata(t *testing.T) {
	f := newFixture(t)

	// Namespace: PUT /status with new labels and annotations (upstream resets spec only).
	nss := f.client.CoreV1().Namespaces()
	ns, err := nss.Get(f.ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"via": "status"}
	ns.Annotations = map[string]string{"note": "put"}
	ns.Spec.Finalizers = nil
	ns, err = nss.UpdateStatus(f.ctx, ns, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ns.Labels["via"] != "status" || ns.Annotations["note"] != "put" {
		t.Errorf("namespace after PUT /status: labels %v annotations %v, want the written ones", ns.Labels, ns.Annotations)
	}
	if len(ns.Spec.Finalizers) != 1 {
		t.Errorf("namespace after PUT /status: spec.finalizers %v, want the stored [kubernetes]", ns.Spec.Finalizers)
	}

	// Pod: a merge patch of /status sets labels, annotations, a finalizer and an owner
	// reference; all but the owner reference stay.
	pods := f.client.CoreV1().Pods("default")
	if _, err := pods.Create(f.ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"labels":{"patched":"true"},"annotations":{"patched":"true"},"finalizers":["example.com/f"],
		"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"00000000-0000-0000-0000-000000000001"}]},
		"spec":{"containers":[{"name":"c","image":"nginx"}]},"status":{"message":"hello"}}`
	pod, err := pods.Patch(f.ctx, "p", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"a": "b", "patched": "true"}, pod.Labels); diff != "" {
		t.Errorf("pod labels after PATCH /status (-want +got):\n%s", diff)
	}
	if pod.Annotations["patched"] != "true" || len(pod.Finalizers) != 1 || pod.Status.Message != "hello" {
		t.Errorf("pod after PATCH /status: annotations %v finalizers %v message %q", pod.Annotations, pod.Finalizers, pod.Status.Message)
	}
	if len(pod.OwnerReferences) != 0 {
		t.Errorf("pod after PATCH /status: ownerReferences %v, want none (pods/status keeps the stored ones)", pod.OwnerReferences)
	}
	if pod.Spec.Containers[0].Image != "busybox" {
		t.Errorf("pod after PATCH /status: image %s, want the stored busybox", pod.Spec.Containers[0].Image)
	}
	got, err := pods.Get(f.ctx, "p", metav1.GetOptions{})
	if err != nil || got.Labels["patched"] != "true" {
		t.Errorf("GET after PATCH /status: %v labels %v", err, got.Labels)
	}

	// Deployment: the status strategy keeps the stored labels, takes the annotations.
	deps := f.client.AppsV1().Deployments("default")
	if _, err := deps.Create(f.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d, err := deps.Patch(f.ctx, "d", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"x":"y"},"annotations":{"x":"y"}},"status":{"observedGeneration":1}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Labels) != 0 || d.Annotations["x"] != "y" || d.Status.ObservedGeneration != 1 {
		t.Errorf("deployment after PATCH /status: labels %v (want none) annotations %v observedGeneration %d", d.Labels, d.Annotations, d.Status.ObservedGeneration)
	}
}

// TestPodGeneration: served by the pod registry, a pod starts at
// generation 1 whatever the client sent, a spec change bumps it, metadata, status and
// binding do not, and the first graceful deletion bumps it once more (rest.BeforeDelete);
// a status write without observedGeneration keeps the stored one.
func TestPodGeneration(t *testing.T) {
	resources := testResources()
	for i := range resources {
		if resources[i].Plural == "pods" {
			resources[i] = core.PodResource()
		}
	}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: resources})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("default")
	step := func(what string, pod *v1.Pod, err error, want int64) *v1.Pod {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if pod.Generation != want {
			t.Errorf("%s: generation %d, want %d", what, pod.Generation, want)
		}
		return pod
	}
	pod, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: 100},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}, TerminationGracePeriodSeconds: ptr.To[int64](30)}}, metav1.CreateOptions{})
	pod = step("create with generation 100", pod, err, 1)

	pod.Annotations = map[string]string{"k": "v"}
	pod, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
	pod = step("annotation", pod, err, 1)

	pod.Spec.Containers[0].Image = "nginx"
	pod.Generation = 1
	pod, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
	pod = step("image", pod, err, 2)

	pod.Status.ObservedGeneration = 2
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, ObservedGeneration: 2}}
	pod, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	pod = step("status", pod, err, 2)
	pod, err = pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"status":{"message":"m","conditions":[{"type":"Ready","status":"False"}]}}`), metav1.PatchOptions{}, "status")
	pod = step("status patch", pod, err, 2)
	if pod.Status.ObservedGeneration != 2 || pod.Status.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("a status write without observedGeneration cleared it: status %d, condition %d",
			pod.Status.ObservedGeneration, pod.Status.Conditions[0].ObservedGeneration)
	}

	if err := pods.Bind(ctx, &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err = pods.Get(ctx, "p", metav1.GetOptions{})
	step("binding", pod, err, 2)

	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](60)}); err != nil {
		t.Fatal(err)
	}
	pod, err = pods.Get(ctx, "p", metav1.GetOptions{})
	step("graceful delete", pod, err, 3)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	pod, err = pods.Get(ctx, "p", metav1.GetOptions{})
	step("shorter grace period", pod, err, 3)
}

// TestTableNotAcceptable: asking only for a Table of an endpoint without a table
// convertor (a create-only review, pods/binding) is refused with 406 NotAcceptable as
// kube-apiserver does ("should return a 406 for a backend which does not implement
// metadata"); a fallback clause is served, and so are tables of ordinary resources.
func TestTableNotAcceptable(t *testing.T) {
	resources := append(testResources(), authorization.SelfSubjectAccessReviewResource())
	answered := 0
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: resources,
		Extra: map[string]SubresourceHandler{"selfsubjectaccessreviews": func(_ context.Context, w http.ResponseWriter, r *http.Request, _ Request) error {
			answered++
			writeObject(w, r, http.StatusCreated, &authorizationv1.SelfSubjectAccessReview{
				TypeMeta: metav1.TypeMeta{Kind: "SelfSubjectAccessReview", APIVersion: "authorization.k8s.io/v1"},
				Status:   authorizationv1.SubjectAccessReviewStatus{Allowed: true}})
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const tableOnly = "application/json;as=Table;v=v1;g=meta.k8s.io"
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	for _, tc := range []struct {
		name   string
		req    *rest.Request
		accept string
		code   int
	}{
		{"review, table only", client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").Body(sar), tableOnly, 406},
		{"review, table or json", client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").Body(sar), tableOnly + ",application/json", 201},
		{"review, metadata", client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").Body(sar), "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", 201},
		{"binding, table only", client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("p").SubResource("binding").
			Body(&v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Target: v1.ObjectReference{Kind: "Node", Name: "n1"}}), tableOnly, 406},
		{"pod, table only", client.CoreV1().RESTClient().Get().Namespace("default").Resource("pods").Name("p"), tableOnly, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			res := tc.req.SetHeader("Accept", tc.accept).Do(ctx).StatusCode(&code)
			if code != tc.code {
				t.Fatalf("status %d (%v), want %d", code, res.Error(), tc.code)
			}
			if code != http.StatusNotAcceptable {
				return
			}
			var st apierrors.APIStatus
			if !errors.As(res.Error(), &st) || st.Status().Reason != metav1.StatusReasonNotAcceptable ||
				!strings.HasPrefix(st.Status().Message, "only the following media types are accepted: application/json") {
				t.Errorf("406 answer: %v, want a NotAcceptable Status", res.Error())
			}
		})
	}
	if answered != 2 {
		t.Errorf("review handler answered %d times, want 2 (the 406s never reach it)", answered)
	}
}
