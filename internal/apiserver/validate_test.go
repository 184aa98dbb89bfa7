package apiserver

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/storage/memory"
)

// recordingValidator records what it is asked, warns with the pod's "warn" label and
// refuses pods labelled refuse=yes.
type recordingValidator struct {
	mu   sync.Mutex
	seen []string
	// labels are the namespace labels the Reader gave for the last pod.
	labels map[string]string
	pods   int
}

func (v *recordingValidator) Validate(ctx context.Context, req *AdmissionRequest) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	op := map[AdmitOp]string{AdmitCreate: "create", AdmitUpdate: "update"}[req.Operation]
	dry := ""
	if req.DryRun {
		dry = " dry"
	}
	v.seen = append(v.seen, op+" "+req.Resource.Resource+"/"+req.Subresource+" "+req.Namespace+"/"+req.Name+dry)
	pod, ok := req.Object.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	if req.Operation == AdmitUpdate && req.OldObject.(*v1.Pod).Name != pod.Name {
		return nil, errors.New("old object is not the stored pod")
	}
	l, err := req.Reader.NamespaceLabels(ctx, req.Namespace)
	if err != nil {
		return nil, err
	}
	v.labels = l
	pods, err := req.Reader.List(ctx, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, req.Namespace)
	if err != nil {
		return nil, err
	}
	v.pods = len(pods)
	if pod.Labels["refuse"] == "yes" {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("refused by the test"))
	}
	if w := pod.Labels["warn"]; w != "" {
		return []string{"warned: " + w}, nil
	}
	return nil, nil
}

type warningList struct {
	mu   sync.Mutex
	list []string
}

func (w *warningList) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warningList) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// TestValidators: validators see creates and updates (subresource, dry run, old
// object), read namespace labels and lists, refuse with their own error and warn
// through Warning headers.
func TestValidators(t *testing.T) {
	val := &recordingValidator{}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Validators: []Validator{val}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	warnings := &warningList{}
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, WarningHandler: warnings, QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "v", Labels: map[string]string{"level": "one"}}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"warn": "hello"}}}
	if _, err := client.CoreV1().Pods("v").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"warned: hello"}, warnings.take()); d != "" {
		t.Errorf("dry-run create warnings (-want +got):\n%s", d)
	}
	created, err := client.CoreV1().Pods("v").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"warned: hello"}, warnings.take()); d != "" {
		t.Errorf("create warnings (-want +got):\n%s", d)
	}
	// The namespace's labels are read from the cache this server's writes update.
	ns.Labels["level"] = "two"
	if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	created.Labels["refuse"] = "yes"
	_, err = client.CoreV1().Pods("v").Update(ctx, created, metav1.UpdateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "p" is forbidden: refused by the test` {
		t.Fatalf("refused update: got %v", err)
	}
	if val.labels["level"] != "two" || val.pods != 1 {
		t.Errorf("the validator read labels %v and %d pods; want level=two and 1 pod", val.labels, val.pods)
	}
	created.Status.Message = "m"
	delete(created.Labels, "refuse")
	if _, err := client.CoreV1().Pods("v").UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"create namespaces/ /v",
		"create pods/ v/p dry",
		"create pods/ v/p",
		"update namespaces/ /v",
		"update pods/ v/p",
		"update pods/status v/p",
	}
	if d := cmp.Diff(want, val.seen); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	got, err := client.CoreV1().Pods("v").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["refuse"] != "" {
		t.Errorf("the refused update was stored: %v", got.Labels)
	}
}
