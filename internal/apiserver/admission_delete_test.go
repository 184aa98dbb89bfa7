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
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/storage/memory"
)

// deleteValidator sees deletes (it implements OperationFilter) and refuses deleting
// pods labelled keep=yes.
type deleteValidator struct {
	mu   sync.Mutex
	seen []string
}

func (v *deleteValidator) HandlesOperation(op AdmitOp) bool { return op == AdmitDelete }

func (v *deleteValidator) Validate(_ context.Context, req *AdmissionRequest) ([]string, error) {
	if req.Operation != AdmitDelete {
		return nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	pod, _ := req.OldObject.(*v1.Pod)
	opts, _ := req.Options.(*metav1.DeleteOptions)
	if pod == nil || req.Object != nil || opts == nil {
		return nil, errors.New("a delete comes with the stored object and the options only")
	}
	entry := "delete " + req.Namespace + "/" + req.Name
	if req.DryRun {
		entry += " dry"
	}
	if opts.GracePeriodSeconds != nil {
		entry += " grace"
	}
	v.seen = append(v.seen, entry)
	if pod.Labels["keep"] == "yes" {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod.Name, errors.New("kept by the test"))
	}
	return nil, nil
}

// TestAdmitDelete: steps that handle deletes see each deletion (dry runs and every item
// of a deletecollection included) with the stored object and the options, and refuse it
// before anything is written; the others never see a delete.
func TestAdmitDelete(t *testing.T) {
	del, plain := &deleteValidator{}, &recordingValidator{}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(), Validators: []Validator{plain, del}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "d"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := client.CoreV1().Pods("d")
	for name, labels := range map[string]map[string]string{"kept": {"keep": "yes"}, "gone": nil} {
		if _, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = pods.Delete(ctx, "kept", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "kept" is forbidden: kept by the test` {
		t.Fatalf("dry-run delete: %v", err)
	}
	if err := pods.Delete(ctx, "kept", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); !apierrors.IsForbidden(err) {
		t.Fatalf("delete: %v", err)
	}
	if _, err := pods.Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused deletion removed the pod: %v", err)
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "!keep"}); err != nil {
		t.Fatal(err)
	}
	want := []string{"delete d/kept dry", "delete d/kept grace", "delete d/gone"}
	del.mu.Lock()
	defer del.mu.Unlock()
	if d := cmp.Diff(want, del.seen); d != "" {
		t.Errorf("deletes seen (-want +got):\n%s", d)
	}
	for _, s := range plain.seen {
		if s[:6] != "create" {
			t.Errorf("a step without OperationFilter saw %q", s)
		}
	}
}

// warningMutator warns about every pod it sees.
type warningMutator struct{}

func (warningMutator) Mutate(context.Context, *AdmissionRequest) error {
	return errors.New("Mutate called instead of MutateWithWarnings")
}

func (warningMutator) MutateWithWarnings(_ context.Context, req *AdmissionRequest) ([]string, error) {
	return []string{"mutated " + req.Name}, nil
}

// TestWarningMutator: a WarningMutator's warnings reach the client on creates and
// updates, before those of validators.
func TestWarningMutator(t *testing.T) {
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: testResources(),
		Mutators: []Mutator{warningMutator{}}, Validators: []Validator{&recordingValidator{}}})
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
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "w"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warnings.take()
	pod, err := client.CoreV1().Pods("w").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{"warn": "v"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"mutated p", "warned: v"}, warnings.take()); d != "" {
		t.Errorf("create warnings (-want +got):\n%s", d)
	}
	pod.Labels["x"] = "y"
	if _, err := client.CoreV1().Pods("w").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"mutated p", "warned: v"}, warnings.take()); d != "" {
		t.Errorf("update warnings (-want +got):\n%s", d)
	}
}
