package aggregator

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tranche/tranche/internal/clusterdial"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apireglisters "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/utils/ptr"
)

// proxyFixture is a Proxy over listers holding one APIService v1alpha1.wardle.example.com
// backed by Service ns/api, whose endpoint is the extension server ext (on loopback).
func proxyFixture(t *testing.T, ext *httptest.Server, available apiregv1.ConditionStatus) *Proxy {
	t.Helper()
	host, portStr, _ := net.SplitHostPort(ext.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	apiServices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(services.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{Name: "https", Port: 443}}}}))
	must(slices.Add(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "api-1",
		Labels: map[string]string{discoveryv1.LabelServiceName: "api"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{host}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port))}}}))
	must(apiServices.Add(&apiregv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1alpha1.wardle.example.com"},
		Spec: apiregv1.APIServiceSpec{Group: "wardle.example.com", Version: "v1alpha1", InsecureSkipTLSVerify: true,
			GroupPriorityMinimum: 2000, VersionPriority: 200, Service: &apiregv1.ServiceReference{Namespace: "ns", Name: "api", Port: ptr.To(int32(443))}},
		Status: apiregv1.APIServiceStatus{Conditions: []apiregv1.APIServiceCondition{{Type: apiregv1.Available, Status: available}}}}))
	must(apiServices.Add(&apiregv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: "v1.apps"},
		Spec: apiregv1.APIServiceSpec{Group: "apps", Version: "v1", GroupPriorityMinimum: 17800, VersionPriority: 15}}))
	getter, err := apiproxy.NewEndpointSliceListerGetter(discoverylisters.NewEndpointSliceLister(slices))
	must(err)
	p := &Proxy{User: func(context.Context) user.Info {
		return &user.DefaultInfo{Name: "alice", Groups: []string{"devs", "system:authenticated"}}
	}}
	p.state.Store(&proxyState{apiServices: apireglisters.NewAPIServiceLister(apiServices),
		resolver: &clusterdial.EndpointResolver{Services: corelisters.NewServiceLister(services), Slices: getter}})
	return p
}

func TestProxy(t *testing.T) {
	ext := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/wardle.example.com/v1alpha1" && r.Header.Get("X-Remote-User") == "system:kube-aggregator" {
			_, _ = io.WriteString(w, `{"kind":"APIResourceList","groupVersion":"wardle.example.com/v1alpha1",`+
				`"resources":[{"name":"flunders","singularName":"flunder","namespaced":true,"kind":"Flunder","verbs":["get","list"]}]}`)
			return
		}
		_, _ = io.WriteString(w, strings.Join([]string{r.URL.RequestURI(), r.Header.Get("X-Remote-User"),
			strings.Join(r.Header.Values("X-Remote-Group"), ","), r.Header.Get("Authorization")}, " "))
	}))
	t.Cleanup(ext.Close)

	p := proxyFixture(t, ext, apiregv1.ConditionTrue)
	if h := p.Proxy("apps", "v1"); h != nil {
		t.Error("a Local APIService is proxied")
	}
	if h := p.Proxy("other.example.com", "v1"); h != nil {
		t.Error("a group version without an APIService is proxied")
	}
	h := p.Proxy("wardle.example.com", "v1alpha1")
	if h == nil {
		t.Fatal("the service-backed APIService is not proxied")
	}
	req := httptest.NewRequest("GET", "/apis/wardle.example.com/v1alpha1/namespaces/x/flunders?limit=1", nil)
	req.Header.Set("Authorization", "Bearer secret")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if want := "/apis/wardle.example.com/v1alpha1/namespaces/x/flunders?limit=1 alice devs,system:authenticated "; rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("proxied: %d %q, want 200 %q", rec.Code, rec.Body.String(), want)
	}

	// An APIService that is not Available answers 503 without calling the server.
	rec = httptest.NewRecorder()
	proxyFixture(t, ext, apiregv1.ConditionFalse).Proxy("wardle.example.com", "v1alpha1").ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "service unavailable") {
		t.Errorf("unavailable APIService: %d %q", rec.Code, rec.Body.String())
	}

	// Discovery lists the available service-backed group versions with their servers'
	// resources; an unavailable one is left out.
	d := p.Discovery()
	if len(d) != 1 || d[0].GroupVersion.String() != "wardle.example.com/v1alpha1" || d[0].Resources == nil ||
		len(d[0].Resources.APIResources) != 1 || d[0].Resources.APIResources[0].Name != "flunders" {
		t.Errorf("discovery: %+v", d)
	}
	if d := proxyFixture(t, ext, apiregv1.ConditionFalse).Discovery(); len(d) != 0 {
		t.Errorf("discovery of an unavailable APIService: %+v", d)
	}

	// Before Start, nothing is proxied.
	if (&Proxy{}).Proxy("wardle.example.com", "v1alpha1") != nil {
		t.Error("a Proxy that was not started proxies")
	}
}
