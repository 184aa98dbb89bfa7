package clusterdial

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/util/proxy"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestEndpointResolver: a Service port resolves to its ready endpoint's target port,
// as kube-apiserver routes webhooks and aggregated servers.
func TestEndpointResolver(t *testing.T) {
	services := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(services.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "webhook"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{
		{Name: "metrics", Port: 9090, TargetPort: intstr.FromInt32(9090)},
		{Name: "https", Port: 443, TargetPort: intstr.FromString("serving")},
	}}}))
	must(services.Add(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "empty"}, Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, Ports: []v1.ServicePort{{Port: 443}}}}))
	must(slices.Add(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "webhook-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "webhook"}},
		Ports:      []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To[int32](9090)}, {Name: ptr.To("https"), Port: ptr.To[int32](8444)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"10.244.2.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}))
	getter, err := proxy.NewEndpointSliceListerGetter(discoverylisters.NewEndpointSliceLister(slices))
	must(err)
	r := &EndpointResolver{Services: corelisters.NewServiceLister(services), Slices: getter}
	u, err := r.ResolveEndpoint("ns", "webhook", 443)
	if err != nil || u.String() != "https://10.244.2.7:8444" {
		t.Errorf("webhook:443 = %v, %v; want the ready endpoint's https port", u, err)
	}
	for _, tc := range []struct {
		name string
		port int32
		want string
	}{
		{"webhook", 8443, `no service port 8443 found for service "webhook"`},
		{"empty", 443, `no endpoints available for service "empty"`},
		{"missing", 443, `service "missing" not found`},
	} {
		if _, err := r.ResolveEndpoint("ns", tc.name, tc.port); err == nil || err.Error() != tc.want {
			t.Errorf("%s:%d: %v, want %q", tc.name, tc.port, err, tc.want)
		}
	}
}
