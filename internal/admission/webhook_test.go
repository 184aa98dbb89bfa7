package admission

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	arv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/apiserver"
)

// reviewServer is an in-process webhook: each path answers with the response its
// handler builds from the AdmissionReview it received, and remembers the requests.
type reviewServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*admissionv1.AdmissionRequest
}

func newReviewServer(t testing.TB, handlers map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse) *reviewServer {
	s := &reviewServer{}
	mux := http.NewServeMux()
	for path, h := range handlers {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			var review admissionv1.AdmissionReview
			if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			s.mu.Lock()
			s.requests = append(s.requests, review.Request)
			s.mu.Unlock()
			resp := h(review.Request)
			resp.UID = review.Request.UID
			review.Request, review.Response = nil, resp
			_ = json.NewEncoder(w).Encode(&review)
		})
	}
	s.Server = httptest.NewTLSServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *reviewServer) caBundle() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}

func (s *reviewServer) last() *admissionv1.AdmissionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil
	}
	return s.requests[len(s.requests)-1]
}

// podRules returns a rule matching pod creates and updates (a fresh one: cases change it).
func podRules() []arv1.RuleWithOperations {
	return []arv1.RuleWithOperations{{
		Operations: []arv1.OperationType{arv1.Create, arv1.Update},
		Rule:       arv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	}}
}

func clientConfig(url string, ca []byte) arv1.WebhookClientConfig {
	return arv1.WebhookClientConfig{URL: &url, CABundle: ca}
}

func validatingHook(name string, cc arv1.WebhookClientConfig, mutate func(*arv1.ValidatingWebhook)) *arv1.ValidatingWebhookConfiguration {
	h := arv1.ValidatingWebhook{Name: name, ClientConfig: cc, Rules: podRules(),
		FailurePolicy: ptr.To(arv1.Fail), SideEffects: ptr.To(arv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: ptr.To[int32](2), NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		MatchPolicy: ptr.To(arv1.Equivalent)}
	if mutate != nil {
		mutate(&h)
	}
	return &arv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}, Webhooks: []arv1.ValidatingWebhook{h}}
}

func startWebhooks(t testing.TB, objects ...runtime.Object) *Webhooks {
	t.Helper()
	objects = append(objects, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "a"}}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := &Webhooks{User: func(context.Context) user.Info {
		return &user.DefaultInfo{Name: "alice", Groups: []string{"devs", user.AllAuthenticated}}
	}}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	clients := Clients{Kube: withOpenAPI{fake.NewClientset(objects...)}, Dynamic: dynamicfake.NewSimpleDynamicClient(scheme.Scheme, objects...),
		RESTMapper: mapper, Authorizer: allowAll{}}
	if err := w.Start(ctx, clients); err != nil {
		t.Fatal(err)
	}
	return w
}

// withOpenAPI is the fake clientset whose discovery serves an empty OpenAPI v3 (the
// fake's own panics), which MutatingAdmissionPolicies' type converter asks for.
type withOpenAPI struct{ *fake.Clientset }

func (c withOpenAPI) Discovery() discovery.DiscoveryInterfaces {
	return openAPIDiscovery{c.Clientset.Discovery().(*fakediscovery.FakeDiscovery)}
}

type openAPIDiscovery struct{ *fakediscovery.FakeDiscovery }

func (openAPIDiscovery) OpenAPIV3() openapi.Client { return noPaths{} }

type noPaths struct{}

func (noPaths) Paths() (map[string]openapi.GroupVersion, error) { return nil, nil }

// allowAll allows every request policies ask the authorizer about.
type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

func podRequest(mutate func(*v1.Pod)) *apiserver.AdmissionRequest {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: map[string]string{"app": "web"}}}
	if mutate != nil {
		mutate(pod)
	}
	return &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate, Resource: v1.SchemeGroupVersion.WithResource("pods"),
		Kind: v1.SchemeGroupVersion.WithKind("Pod"), Namespace: "ns", Name: "p", Object: pod}
}

func deny(message string) func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{Message: message, Code: http.StatusForbidden}}
	}
}

func TestValidatingWebhook(t *testing.T) {
	srv := newReviewServer(t, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/deny": deny("this webhook denies all requests"),
		"/slow": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			time.Sleep(1500 * time.Millisecond)
			return &admissionv1.AdmissionResponse{Allowed: true}
		},
		"/warn": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: true, Warnings: []string{"careful"}}
		},
	})
	cc := func(path string) arv1.WebhookClientConfig { return clientConfig(srv.URL+path, srv.caBundle()) }
	tests := []struct {
		name     string
		config   *arv1.ValidatingWebhookConfiguration
		req      *apiserver.AdmissionRequest
		wantErr  string
		warnings []string
	}{
		{name: "denied", config: validatingHook("deny.example.com", cc("/deny"), nil), req: podRequest(nil),
			wantErr: `admission webhook "deny.example.com" denied the request: this webhook denies all requests`},
		{name: "warning", config: validatingHook("warn.example.com", cc("/warn"), nil), req: podRequest(nil), warnings: []string{"careful"}},
		{name: "object selector misses", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}
		})},
		{name: "namespace selector misses", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
		})},
		{name: "namespace selector matches", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		}), wantErr: `admission webhook "deny.example.com" denied the request: this webhook denies all requests`},
		{name: "match condition false", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.MatchConditions = []arv1.MatchCondition{{Name: "not-alice", Expression: `request.userInfo.username != "alice"`}}
		})},
		{name: "match condition asks the authorizer", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.MatchConditions = []arv1.MatchCondition{{Name: "may-create", Expression: `authorizer.group('').resource('pods').namespace('ns').check('create').allowed()`}}
		}), wantErr: `admission webhook "deny.example.com" denied the request: this webhook denies all requests`},
		{name: "reviews are excluded", config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.Rules[0].Rule = arv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}}
		}), req: &apiserver.AdmissionRequest{Operation: apiserver.AdmitCreate,
			Resource: authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews"),
			Kind:     authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"), Object: &authorizationv1.SubjectAccessReview{}}},
		{name: "rule misses", req: podRequest(nil), config: validatingHook("deny.example.com", cc("/deny"), func(h *arv1.ValidatingWebhook) {
			h.Rules[0].Resources = []string{"configmaps"}
		})},
		{name: "timeout", req: podRequest(nil), config: validatingHook("slow.example.com", cc("/slow"), func(h *arv1.ValidatingWebhook) {
			h.TimeoutSeconds = ptr.To[int32](1)
		}), wantErr: `Internal error occurred: failed calling webhook "slow.example.com": failed to call webhook: Post "` + srv.URL + `/slow?timeout=1s": context deadline exceeded`},
		{name: "unreachable, fail", req: podRequest(nil), config: validatingHook("down.example.com", clientConfig("https://127.0.0.1:1/", nil), nil),
			wantErr: `Internal error occurred: failed calling webhook "down.example.com": failed to call webhook: Post "https://127.0.0.1:1/?timeout=2s"`},
		{name: "unreachable, ignore", req: podRequest(nil), config: validatingHook("down.example.com", clientConfig("https://127.0.0.1:1/", nil), func(h *arv1.ValidatingWebhook) {
			h.FailurePolicy = ptr.To(arv1.Ignore)
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := startWebhooks(t, tc.config)
			warnings, err := w.Validate(context.Background(), tc.req)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWebhookSeesRequester(t *testing.T) {
	srv := newReviewServer(t, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/allow": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: true}
		},
	})
	w := startWebhooks(t, validatingHook("allow.example.com", clientConfig(srv.URL+"/allow", srv.caBundle()), nil))
	req := podRequest(nil)
	req.Operation, req.DryRun = apiserver.AdmitUpdate, true
	req.OldObject = podRequest(func(p *v1.Pod) { p.Labels = nil }).Object
	if _, err := w.Validate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := srv.last()
	if got == nil {
		t.Fatal("webhook not called")
	}
	if got.UserInfo.Username != "alice" || got.Operation != admissionv1.Update || !ptr.Deref(got.DryRun, false) ||
		got.Namespace != "ns" || got.Name != "p" || got.Kind.Kind != "Pod" || len(got.OldObject.Raw) == 0 {
		t.Errorf("request %+v", got)
	}
	if !strings.Contains(string(got.Options.Raw), `"kind":"UpdateOptions"`) || !strings.Contains(string(got.Options.Raw), `"dryRun":["All"]`) {
		t.Errorf("options %s", got.Options.Raw)
	}
	if k := req.Object.GetObjectKind().GroupVersionKind(); !k.Empty() {
		t.Errorf("the request's object keeps kind %v", k)
	}
}

func TestMutatingWebhookPatches(t *testing.T) {
	patch := admissionv1.PatchTypeJSONPatch
	srv := newReviewServer(t, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/label": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &patch, Warnings: []string{"labelled"},
				Patch: []byte(`[{"op":"add","path":"/metadata/labels/mutated","value":"yes"}]`)}
		},
	})
	url := srv.URL + "/label"
	cfg := &arv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []arv1.MutatingWebhook{{
		Name: "label.example.com", ClientConfig: arv1.WebhookClientConfig{URL: &url, CABundle: srv.caBundle()}, Rules: podRules(),
		FailurePolicy: ptr.To(arv1.Fail), SideEffects: ptr.To(arv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		TimeoutSeconds: ptr.To[int32](2), NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		MatchPolicy: ptr.To(arv1.Equivalent), ReinvocationPolicy: ptr.To(arv1.NeverReinvocationPolicy),
	}}}
	w := startWebhooks(t, cfg)
	req := podRequest(nil)
	warnings, err := w.MutateWithWarnings(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"labelled"}, warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	want := map[string]string{"app": "web", "mutated": "yes"}
	if diff := cmp.Diff(want, req.Object.(*v1.Pod).Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

func TestBeforeStartAdmitsEverything(t *testing.T) {
	w := &Webhooks{}
	if err := w.Mutate(context.Background(), podRequest(nil)); err != nil {
		t.Error(err)
	}
	if _, err := w.Validate(context.Background(), podRequest(nil)); err != nil {
		t.Error(err)
	}
}

func TestWebhookSeesDelete(t *testing.T) {
	srv := newReviewServer(t, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/deny": deny("not deleted"),
	})
	w := startWebhooks(t, validatingHook("deny.example.com", clientConfig(srv.URL+"/deny", srv.caBundle()), func(h *arv1.ValidatingWebhook) {
		h.Rules[0].Operations = []arv1.OperationType{arv1.Delete}
	}))
	if !w.HandlesOperation(apiserver.AdmitDelete) {
		t.Fatal("deletes not handled")
	}
	pod := podRequest(nil).Object
	req := &apiserver.AdmissionRequest{Operation: apiserver.AdmitDelete, Resource: v1.SchemeGroupVersion.WithResource("pods"),
		Kind: v1.SchemeGroupVersion.WithKind("Pod"), Namespace: "ns", Name: "p", OldObject: pod,
		Options: &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](3)}}
	_, err := w.Validate(context.Background(), req)
	if err == nil || err.Error() != `admission webhook "deny.example.com" denied the request: not deleted` {
		t.Fatalf("error %v", err)
	}
	got := srv.last()
	if got.Operation != admissionv1.Delete || len(got.Object.Raw) != 0 || !strings.Contains(string(got.OldObject.Raw), `"name":"p"`) {
		t.Errorf("request %+v", got)
	}
	if !strings.Contains(string(got.Options.Raw), `"kind":"DeleteOptions"`) || !strings.Contains(string(got.Options.Raw), `"gracePeriodSeconds":3`) {
		t.Errorf("options %s", got.Options.Raw)
	}
	// A create does not match the DELETE rule.
	if _, err := w.Validate(context.Background(), podRequest(nil)); err != nil {
		t.Errorf("create: %v", err)
	}
}

func TestMutatingWebhookReinvocation(t *testing.T) {
	patch := admissionv1.PatchTypeJSONPatch
	addLabel := func(key string) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Allowed: true, PatchType: &patch,
			Patch: []byte(`[{"op":"add","path":"/metadata/labels/` + key + `","value":"yes"}]`)}
	}
	srv := newReviewServer(t, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		// first labels a pod once, and notes when it sees second's label.
		"/first": func(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			var pod v1.Pod
			if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
				return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: err.Error()}}
			}
			if pod.Labels["second"] == "yes" {
				return addLabel("first-saw-second")
			}
			if pod.Labels["first"] == "yes" {
				return &admissionv1.AdmissionResponse{Allowed: true}
			}
			return addLabel("first")
		},
		"/second": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return addLabel("second") },
	})
	for _, tc := range []struct {
		policy arv1.ReinvocationPolicyType
		want   map[string]string
	}{
		{arv1.NeverReinvocationPolicy, map[string]string{"app": "web", "first": "yes", "second": "yes"}},
		{arv1.IfNeededReinvocationPolicy, map[string]string{"app": "web", "first": "yes", "second": "yes", "first-saw-second": "yes"}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			hook := func(name, path string, policy arv1.ReinvocationPolicyType) arv1.MutatingWebhook {
				url := srv.URL + path
				return arv1.MutatingWebhook{Name: name, ClientConfig: arv1.WebhookClientConfig{URL: &url, CABundle: srv.caBundle()}, Rules: podRules(),
					FailurePolicy: ptr.To(arv1.Fail), SideEffects: ptr.To(arv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
					TimeoutSeconds: ptr.To[int32](2), NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
					MatchPolicy: ptr.To(arv1.Equivalent), ReinvocationPolicy: &policy}
			}
			w := startWebhooks(t, &arv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Webhooks: []arv1.MutatingWebhook{
				hook("first.example.com", "/first", tc.policy), hook("second.example.com", "/second", arv1.NeverReinvocationPolicy)}})
			req := podRequest(nil)
			if err := w.Mutate(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, req.Object.(*v1.Pod).Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}
