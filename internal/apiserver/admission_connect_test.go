package apiserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage/memory"
)

// connectValidator sees connects and refuses attaching to container "c1" with stdin.
type connectValidator struct {
	mu   sync.Mutex
	seen []string
}

func (v *connectValidator) HandlesOperation(op AdmitOp) bool { return op == AdmitConnect }

func (v *connectValidator) Validate(_ context.Context, req *AdmissionRequest) ([]string, error) {
	if req.Operation != AdmitConnect {
		return nil, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen = append(v.seen, req.Kind.Kind+" "+req.Resource.Resource+"/"+req.Subresource+" "+req.Namespace+"/"+req.Name)
	switch o := req.Object.(type) {
	case *v1.PodAttachOptions:
		if o.Container == "c1" && o.Stdin {
			return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, req.Name, errors.New("no attaching to c1"))
		}
	case *v1.ServiceProxyOptions:
		if o.Path != "/healthz" {
			return nil, errors.New("unexpected proxy path " + o.Path)
		}
	}
	return nil, nil
}

// TestAdmitConnect: streaming and proxy subresources are admitted as CONNECT with their
// options (from the query, and the path below a proxy) before they are carried to a
// node or pod; a refusal is the client's answer.
func TestAdmitConnect(t *testing.T) {
	val := &connectValidator{}
	api, err := New(Config{Storage: memory.New(50 * time.Millisecond), Resources: all.Resources(), Validators: []Validator{val}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	post := func(path string) (int, string) {
		resp, err := http.Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	code, body := post("/api/v1/namespaces/c/pods/p/attach?container=c1&stdin=true")
	if code != http.StatusForbidden || !strings.Contains(body, `pods \"p\" is forbidden: no attaching to c1`) {
		t.Errorf("attach to c1: %d %s", code, body)
	}
	// Admitted, then refused for want of a way to the nodes (none configured here).
	if code, body := post("/api/v1/namespaces/c/pods/p/attach?container=c2&stdin=true"); code != http.StatusServiceUnavailable {
		t.Errorf("attach to c2: %d %s", code, body)
	}
	if code, body := post("/api/v1/namespaces/c/services/web:80/proxy/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("service proxy: %d %s", code, body)
	}
	want := "PodAttachOptions pods/attach c/p,PodAttachOptions pods/attach c/p,ServiceProxyOptions services/proxy c/web:80"
	val.mu.Lock()
	defer val.mu.Unlock()
	if got := strings.Join(val.seen, ","); got != want {
		t.Errorf("connects seen:\n%s\nwant\n%s", got, want)
	}
}
