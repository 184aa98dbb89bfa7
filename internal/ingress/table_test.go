package ingress

import (
	"crypto/x509"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/utils/ptr"
)

const (
	exact    = networkingv1.PathTypeExact
	prefix   = networkingv1.PathTypePrefix
	implSpec = networkingv1.PathTypeImplementationSpecific
)

// seedIngress is seed 003's mon-ingress (class left to the default).
func seedIngress() *networkingv1.Ingress {
	return makeIngress("default", "mon-ingress", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("monapp.example.com",
			path("/web", prefix, svcBackend("service-web", 80)),
			path("/api", prefix, svcBackend("service-api", 8080)))}
		ing.Spec.DefaultBackend = ptr.To(svcBackend("service-default-page", 80))
	})
}

func TestRoute(t *testing.T) {
	routing := makeIngress("default", "routing", 1, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{
			rule("a.example.com",
				path("/", prefix, svcBackend("root", 80)),
				path("/foo", prefix, svcBackend("foo", 80)),
				path("/foo/bar/", prefix, svcBackend("foobar", 80)),
				path("/foo/bar", exact, svcBackend("foobar-exact", 80)),
				path("/impl", implSpec, svcBackend("impl", 80))),
			rule("*.wild.example.com", path("/", prefix, svcBackend("wild", 80))),
			rule("", path("/nohost", prefix, svcBackend("nohost", 80))),
		}
	})
	tab := Build(NewFake(defaultClass(), seedIngress(), routing))
	cases := []struct {
		host, path string
		want       string // service name, "" for no route
	}{
		{"monapp.example.com", "/web", "service-web"},
		{"MonApp.Example.com", "/web/index.html", "service-web"},
		{"monapp.example.com", "/api/v1/things", "service-api"},
		{"monapp.example.com", "/webby", ""},
		{"monapp.example.com", "/", ""},
		{"other.example.com", "/web", ""},
		{"a.example.com", "/", "root"},
		{"a.example.com", "/foobar", "root"},
		{"a.example.com", "/foo", "foo"},
		{"a.example.com", "/foo/", "foo"},
		{"a.example.com", "/foo/bar", "foobar-exact"},
		{"a.example.com", "/foo/bar/", "foobar"},
		{"a.example.com", "/foo/bar/baz", "foobar"},
		{"a.example.com", "/impl/x", "impl"},
		{"a.example.com", "/implx", "root"},
		{"x.wild.example.com", "/anything", "wild"},
		{"y.x.wild.example.com", "/anything", ""},
		{"wild.example.com", "/anything", ""},
		{"x.wild.example.com", "/nohost/a", "wild"},
		{"unknown.test", "/nohost/a", "nohost"},
		{"monapp.example.com", "/nohost", "nohost"},
	}
	for _, tc := range cases {
		t.Run(tc.host+tc.path, func(t *testing.T) {
			got := ""
			if r := tab.Route(tc.host, tc.path); r != nil {
				got = r.Backend.Service
			}
			if got != tc.want {
				t.Errorf("Route(%q, %q) = %q, want %q", tc.host, tc.path, got, tc.want)
			}
		})
	}
	if d := tab.Default(); d == nil || d.Service != "service-default-page" {
		t.Errorf("Default() = %+v, want service-default-page", d)
	}
}

func TestClasses(t *testing.T) {
	nginx := makeClass("nginx", nil)
	other := makeClass("other", func(ic *networkingv1.IngressClass) { ic.Spec.Controller = "example.com/other" })
	withClass := func(name, class string) *networkingv1.Ingress {
		return makeIngress("default", name, 0, func(ing *networkingv1.Ingress) {
			if class != "" {
				ing.Spec.IngressClassName = ptr.To(class)
			}
			ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
		})
	}
	legacy := withClass("legacy", "")
	legacy.Annotations = map[string]string{annotationLegacyClass: "nginx"}
	cases := []struct {
		name     string
		objs     []any
		want     []string
		problems []string
	}{
		{"default class takes classless", []any{defaultClass(), withClass("a", "")}, []string{"default/a"}, nil},
		{"no default class, classless ignored", []any{makeClass("tranche", nil), withClass("a", "")}, nil, nil},
		{"class of ours by controller", []any{defaultClass(), nginx, withClass("a", "nginx")}, []string{"default/a"}, nil},
		{"legacy annotation", []any{nginx, legacy}, []string{"default/legacy"}, nil},
		{"other controller's class ignored quietly", []any{defaultClass(), other, withClass("a", "other")}, nil, nil},
		{"missing class gets an event", []any{defaultClass(), withClass("a", "nginx")}, nil, []string{"default/a IngressClassMissing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake(tc.objs...)
			f.Add(makeService("default", "s", nil))
			tab := Build(f)
			if diff := cmp.Diff(tc.want, tab.Ingresses); diff != "" {
				t.Errorf("Ingresses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.problems, problemKeys(tab)); diff != "" {
				t.Errorf("Problems (-want +got):\n%s", diff)
			}
		})
	}
}

func problemKeys(t *Table) []string {
	var out []string
	for _, p := range t.Problems {
		out = append(out, p.Ingress+" "+p.Reason)
	}
	return out
}

func TestConflictsOldestWins(t *testing.T) {
	young := makeIngress("b", "young", 5, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("h.test", path("/x", prefix, svcBackend("young", 80)), path("/y", prefix, svcBackend("young", 80)))}
		ing.Spec.DefaultBackend = ptr.To(svcBackend("young", 80))
	})
	old := makeIngress("a", "old", 1, func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = []networkingv1.IngressRule{rule("h.test", path("/x/", prefix, svcBackend("old", 80)))}
		ing.Spec.DefaultBackend = ptr.To(svcBackend("old", 80))
	})
	tab := Build(NewFake(defaultClass(), young, old,
		makeService("a", "old", nil), makeService("b", "young", nil)))
	if got := tab.Route("h.test", "/x").Backend.Service; got != "old" {
		t.Errorf("/x goes to %q, want the oldest Ingress's old", got)
	}
	if got := tab.Route("h.test", "/y").Backend.Service; got != "young" {
		t.Errorf("/y goes to %q, want young (no conflict there)", got)
	}
	if got := tab.Default().Service; got != "old" {
		t.Errorf("default backend %q, want old", got)
	}
	want := []string{"b/young Conflict", "b/young Conflict"}
	if diff := cmp.Diff(want, problemKeys(tab)); diff != "" {
		t.Errorf("Problems (-want +got):\n%s\n%+v", diff, tab.Problems)
	}
}

func TestBackends(t *testing.T) {
	named := makeService("default", "svc-app-avec-port-nomme", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "http-admin", Port: 8080, Protocol: v1.ProtocolTCP}}
	})
	twoPorts := makeService("default", "two", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "a", Port: 80, Protocol: v1.ProtocolTCP}, {Name: "b", Port: 81, Protocol: v1.ProtocolTCP}}
	})
	cases := []struct {
		name        string
		backend     networkingv1.IngressBackend
		objs        []any
		ready, fall []string
		missing     bool
	}{
		{"by port name, slice port is the target", svcBackend("svc-app-avec-port-nomme", "http-admin"), []any{named,
			makeSlice("default", "n1", "svc-app-avec-port-nomme", "http-admin", 80, []string{"10.244.1.5", "10.244.2.5"}, nil)},
			[]string{"10.244.1.5:80", "10.244.2.5:80"}, nil, false},
		{"by number picks the matching slice port", svcBackend("two", 81), []any{twoPorts,
			makeSlice("default", "t1", "two", "a", 8080, []string{"10.244.1.7"}, func(sl *discoveryv1.EndpointSlice) {
				sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To("b"), Port: ptr.To(int32(9090)), Protocol: ptr.To(v1.ProtocolTCP)})
			})}, []string{"10.244.1.7:9090"}, nil, false},
		{"several slices, unready skipped, terminating serving as fallback", svcBackend("s", 80), []any{makeService("default", "s", nil),
			makeSlice("default", "s1", "s", "http", 8080, []string{"10.244.1.1"}, func(sl *discoveryv1.EndpointSlice) {
				sl.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
			}),
			makeSlice("default", "s2", "s", "http", 8080, []string{"10.244.2.1"}, func(sl *discoveryv1.EndpointSlice) {
				sl.Endpoints[0].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}
			})}, nil, []string{"10.244.1.1:8080"}, false},
		{"missing service", svcBackend("nope", 80), nil, nil, nil, true},
		{"missing port", svcBackend("s", 81), []any{makeService("default", "s", nil)}, nil, nil, true},
		{"missing port name", svcBackend("s", "grpc"), []any{makeService("default", "s", nil)}, nil, nil, true},
		{"ExternalName", svcBackend("s", 80), []any{makeService("default", "s", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
		})}, nil, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ing := makeIngress("default", "i", 0, func(ing *networkingv1.Ingress) { ing.Spec.DefaultBackend = &tc.backend })
			f := NewFake(append([]any{defaultClass(), ing}, tc.objs...)...)
			be := Build(f).Default()
			if diff := cmp.Diff(tc.ready, be.Ready); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.fall, be.Fallback); diff != "" {
				t.Errorf("Fallback (-want +got):\n%s", diff)
			}
			if (be.Missing != "") != tc.missing {
				t.Errorf("Missing = %q, want missing=%v", be.Missing, tc.missing)
			}
		})
	}
}

func TestPickRoundRobin(t *testing.T) {
	be := &Backend{Ready: []string{"a", "b", "c"}}
	var got []string
	for range 6 {
		got = append(got, be.Pick())
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "a", "b", "c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if (&Backend{}).Pick() != "" {
		t.Error("Pick on no endpoints must return empty")
	}
}

// TestPickOther: a retry gets an endpoint the request has not tried, whatever other
// requests did to the round robin meanwhile, and none once every one was tried.
func TestPickOther(t *testing.T) {
	be := &Backend{Ready: []string{"a", "b", "c"}}
	first := be.Pick() // a
	be.Pick()          // b, another request's
	be.Pick()          // c, another's: Pick would now give a again
	if got := be.PickOther([]string{first}); got == first || got == "" {
		t.Errorf("retry after %s: %q, want another endpoint", first, got)
	}
	for range 5 {
		if got := be.PickOther([]string{"a", "c"}); got != "b" {
			t.Fatalf("after a and c: %q, want b", got)
		}
	}
	if got := be.PickOther([]string{"c", "a", "b"}); got != "" {
		t.Errorf("after every endpoint: %q, want none", got)
	}
	if got := (&Backend{Fallback: []string{"t"}}).PickOther(nil); got != "t" {
		t.Errorf("terminating fallback: %q", got)
	}
}

func TestCertificates(t *testing.T) {
	ing := makeIngress("default", "mon-ingress-tls", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.TLS = []networkingv1.IngressTLS{
			{Hosts: []string{"monapp.secure.example.com"}, SecretName: "mon-tls-secret"},
			{Hosts: []string{"*.wild.test"}, SecretName: "wild"},
			{Hosts: []string{"missing.test"}, SecretName: "nope"},
			{Hosts: []string{"opaque.test"}, SecretName: "opaque"},
		}
		ing.Spec.Rules = []networkingv1.IngressRule{rule("monapp.secure.example.com", path("/secure-data", prefix, svcBackend("s", 443)))}
	})
	opaque := tlsSecret(t, "default", "opaque", "opaque.test")
	opaque.Type = v1.SecretTypeOpaque
	tab := Build(NewFake(defaultClass(), ing, makeService("default", "s", nil),
		tlsSecret(t, "default", "mon-tls-secret", "monapp.secure.example.com"), tlsSecret(t, "default", "wild", "*.wild.test"), opaque))
	cn := func(name string) string {
		c := tab.Certificate(name)
		if c == nil {
			return ""
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x.Subject.CommonName
	}
	for name, want := range map[string]string{
		"monapp.secure.example.com": "monapp.secure.example.com",
		"MONAPP.secure.example.com": "monapp.secure.example.com",
		"a.wild.test":               "*.wild.test",
		"a.b.wild.test":             "",
		"missing.test":              "",
		"opaque.test":               "",
		"":                          "",
	} {
		if got := cn(name); got != want {
			t.Errorf("Certificate(%q) has CN %q, want %q", name, got, want)
		}
	}
	want := []string{"default/mon-ingress-tls BackendMissing", "default/mon-ingress-tls TLSSecretInvalid", "default/mon-ingress-tls TLSSecretInvalid"}
	if diff := cmp.Diff(want, problemKeys(tab)); diff != "" {
		t.Errorf("Problems (-want +got):\n%s", diff)
	}
}

func TestStatusUpdates(t *testing.T) {
	lb := makeService("kube-system", "tranche-ingress", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "127.0.10.1"}}
	})
	done := makeIngress("default", "done", 0, func(ing *networkingv1.Ingress) {
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "127.0.10.1"}}
	})
	todo := makeIngress("default", "todo", 1, func(ing *networkingv1.Ingress) { ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80)) })
	notOurs := makeIngress("default", "theirs", 2, func(ing *networkingv1.Ingress) {
		ing.Spec.IngressClassName = ptr.To("other")
		ing.Spec.DefaultBackend = ptr.To(svcBackend("s", 80))
	})
	f := NewFake(defaultClass(), lb, done, todo, notOurs)
	tab := Build(f)
	got := StatusUpdates(f, tab, "kube-system/tranche-ingress")
	if len(got) != 1 || got[0].Name != "todo" || got[0].Status.LoadBalancer.Ingress[0].IP != "127.0.10.1" {
		t.Errorf("StatusUpdates = %+v, want only todo with 127.0.10.1", got)
	}
	if todo.Status.LoadBalancer.Ingress != nil {
		t.Error("StatusUpdates modified the cached object")
	}
	if got := StatusUpdates(f, tab, "kube-system/absent"); got != nil {
		t.Errorf("absent publish Service: %+v, want nothing", got)
	}
}
