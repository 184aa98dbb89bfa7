package networking

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func errStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func prefix() *networkingv1.PathType { return new(networkingv1.PathTypePrefix) }

// makeIngress returns a valid Ingress routing web.example.com/ to Service web:80, changed
// by mutate.
func makeIngress(mutate func(*networkingv1.Ingress)) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", CreationTimestamp: metav1.NewTime(created)},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: "web.example.com",
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     "/",
						PathType: prefix(),
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80},
						}},
					}},
				}},
			}},
		},
	}
	if mutate != nil {
		mutate(ing)
	}
	return ing
}

func firstPath(ing *networkingv1.Ingress) *networkingv1.HTTPIngressPath {
	return &ing.Spec.Rules[0].HTTP.Paths[0]
}

func TestValidateIngress(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   []string
	}{
		{name: "valid"},
		{name: "wildcard host", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "*.example.com" }},
		{name: "default backend only", mutate: func(i *networkingv1.Ingress) {
			i.Spec.DefaultBackend = firstPath(i).Backend.DeepCopy()
			i.Spec.Rules = nil
		}},
		{name: "neither rules nor default backend", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules = nil },
			want: []string{"spec: Invalid value: null: either `defaultBackend` or `rules` must be specified"}},
		{name: "IP host", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "10.0.0.1" },
			want: []string{`spec.rules[0].host: Invalid value: "10.0.0.1": must be a DNS name, not an IP address`}},
		{name: "bad host", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "Web.example.com" },
			want: []string{`spec.rules[0].host: Invalid value: "Web.example.com": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "wildcard not leading", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "web.*.com" },
			want: []string{`spec.rules[0].host: Invalid value: "web.*.com": a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "no paths", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].HTTP.Paths = nil },
			want: []string{"spec.rules[0].http.paths: Required value"}},
		{name: "pathType required", mutate: func(i *networkingv1.Ingress) { firstPath(i).PathType = nil },
			want: []string{"spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified"}},
		{name: "pathType unsupported", mutate: func(i *networkingv1.Ingress) { firstPath(i).PathType = new(networkingv1.PathType("Regex")) },
			want: []string{`spec.rules[0].http.paths[0].pathType: Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", "Prefix"`}},
		{name: "relative prefix path", mutate: func(i *networkingv1.Ingress) { firstPath(i).Path = "api" },
			want: []string{`spec.rules[0].http.paths[0].path: Invalid value: "api": must be an absolute path`}},
		{name: "empty exact path", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Path = ""
			firstPath(i).PathType = new(networkingv1.PathTypeExact)
		}, want: []string{`spec.rules[0].http.paths[0].path: Invalid value: "": must be an absolute path`}},
		{name: "double slash", mutate: func(i *networkingv1.Ingress) { firstPath(i).Path = "/a//b" },
			want: []string{`spec.rules[0].http.paths[0].path: Invalid value: "/a//b": must not contain '//'`}},
		{name: "dot suffix", mutate: func(i *networkingv1.Ingress) { firstPath(i).Path = "/a/.." },
			want: []string{`spec.rules[0].http.paths[0].path: Invalid value: "/a/..": cannot end with '/..'`}},
		{name: "implementation specific may be empty", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Path = ""
			firstPath(i).PathType = new(networkingv1.PathTypeImplementationSpecific)
		}},
		{name: "implementation specific relative", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Path = "x"
			firstPath(i).PathType = new(networkingv1.PathTypeImplementationSpecific)
		}, want: []string{`spec.rules[0].http.paths[0].path: Invalid value: "x": must be an absolute path`}},
		{name: "no backend", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend = networkingv1.IngressBackend{} },
			want: []string{`spec.rules[0].http.paths[0].backend: Invalid value: "": resource or service backend is required`}},
		{name: "both backends", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Backend.Resource = &corev1.TypedLocalObjectReference{Kind: "Bucket", Name: "b"}
		}, want: []string{`spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both resource and service backends`}},
		{name: "resource backend", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{APIGroup: new("k8s.example.com"), Kind: "Bucket", Name: "b"}}
		}},
		{name: "resource backend without kind", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Backend = networkingv1.IngressBackend{Resource: &corev1.TypedLocalObjectReference{Name: "a/b"}}
		}, want: []string{
			"spec.rules[0].http.paths[0].backend.resource.kind: Required value",
			`spec.rules[0].http.paths[0].backend.resource.name: Invalid value: "a/b": may not contain '/'`,
		}},
		{name: "service name required", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend.Service.Name = "" },
			want: []string{"spec.rules[0].http.paths[0].backend.service.name: Required value"}},
		{name: "service name not DNS-1035", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend.Service.Name = "1web" },
			want: []string{`spec.rules[0].http.paths[0].backend.service.name: Invalid value: "1web": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`}},
		{name: "port name and number", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend.Service.Port.Name = "http" },
			want: []string{`spec.rules[0].http.paths[0].backend: Invalid value: "": cannot set both port name & port number`}},
		{name: "port missing", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend.Service.Port.Number = 0 },
			want: []string{"spec.rules[0].http.paths[0].backend: Required value: port name or number is required"}},
		{name: "port out of range", mutate: func(i *networkingv1.Ingress) { firstPath(i).Backend.Service.Port.Number = 70000 },
			want: []string{"spec.rules[0].http.paths[0].backend.service.port.number: Invalid value: 70000: must be between 1 and 65535, inclusive"}},
		{name: "bad port name", mutate: func(i *networkingv1.Ingress) {
			firstPath(i).Backend.Service.Port = networkingv1.ServiceBackendPort{Name: "HTTP"}
		}, want: []string{`spec.rules[0].http.paths[0].backend.service.port.name: Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`,
			`spec.rules[0].http.paths[0].backend.service.port.name: Invalid value: "HTTP": must contain at least one letter (a-z)`,
		}},
		{name: "TLS hosts and secret", mutate: func(i *networkingv1.Ingress) {
			i.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"*.example.com", "a_b"}, SecretName: "Web"}}
		}, want: []string{
			`spec.tls[0].hosts[1]: Invalid value: "a_b": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`spec.tls[0].secretName: Invalid value: "Web": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{name: "bad class name", mutate: func(i *networkingv1.Ingress) { i.Spec.IngressClassName = new("Nginx") },
			want: []string{`spec.ingressClassName: Invalid value: "Nginx": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "annotation disagrees with class", mutate: func(i *networkingv1.Ingress) {
			i.Annotations = map[string]string{annotationIngressClass: "nginx"}
			i.Spec.IngressClassName = new("tranche")
		}, want: []string{`annotations.kubernetes.io/ingress.class: Invalid value: "nginx": must match ` + "`ingressClassName`" + ` when both are specified`}},
	}
	r := IngressResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(makeIngress(tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateIngressUpdateKeepsStoredOddities(t *testing.T) {
	badSecret := func(i *networkingv1.Ingress) { i.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "Web"}} }
	if errs := ValidateIngressUpdate(makeIngress(badSecret), makeIngress(badSecret)); len(errs) != 0 {
		t.Errorf("stored invalid secret name refused on update: %v", errs)
	}
	if errs := ValidateIngressUpdate(makeIngress(badSecret), makeIngress(nil)); len(errs) != 1 {
		t.Errorf("new invalid secret name: got %v, want one error", errs)
	}
}

func TestValidateIngressStatusUpdate(t *testing.T) {
	withLB := func(lb ...networkingv1.IngressLoadBalancerIngress) func(*networkingv1.Ingress) {
		return func(i *networkingv1.Ingress) { i.Status.LoadBalancer.Ingress = lb }
	}
	tests := []struct {
		name     string
		obj, old func(*networkingv1.Ingress)
		want     []string
	}{
		{name: "valid", obj: withLB(networkingv1.IngressLoadBalancerIngress{IP: "127.0.10.1"}, networkingv1.IngressLoadBalancerIngress{Hostname: "lb.example.com"})},
		{name: "bad IP", obj: withLB(networkingv1.IngressLoadBalancerIngress{IP: "1.2.3"}),
			want: []string{`status.loadBalancer.ingress[0].ip: Invalid value: "1.2.3": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)`}},
		{name: "stored odd IP kept", obj: withLB(networkingv1.IngressLoadBalancerIngress{IP: "010.0.0.1"}), old: withLB(networkingv1.IngressLoadBalancerIngress{IP: "010.0.0.1"})},
		{name: "IP as hostname", obj: withLB(networkingv1.IngressLoadBalancerIngress{Hostname: "10.0.0.1"}),
			want: []string{`status.loadBalancer.ingress[0].hostname: Invalid value: "10.0.0.1": must be a DNS name, not an IP address`}},
	}
	r := IngressResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Status.ValidateUpdate(makeIngress(tc.obj), makeIngress(tc.old)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIngressPrepareAndWarnings(t *testing.T) {
	r := IngressResource()
	ing := makeIngress(func(i *networkingv1.Ingress) {
		i.Annotations = map[string]string{annotationIngressClass: "nginx"}
		i.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "1.2.3.4"}}
	})
	r.PrepareForCreate(ing)
	if len(ing.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("create kept status: %v", ing.Status)
	}
	want := []string{`annotation "kubernetes.io/ingress.class" is deprecated, please use 'spec.ingressClassName' instead`}
	if diff := cmp.Diff(want, r.Warnings(ing, nil)); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if w := r.Warnings(ing, ing); w != nil {
		t.Errorf("update warnings = %v", w)
	}
}

func TestIngressRow(t *testing.T) {
	now := created.Add(5 * time.Minute)
	rule := func(host string) networkingv1.IngressRule { return networkingv1.IngressRule{Host: host} }
	tests := []struct {
		name   string
		mutate func(*networkingv1.Ingress)
		want   []interface{}
	}{
		{name: "plain", want: []interface{}{"web", "<none>", "web.example.com", "", "80", "5m"}},
		{name: "class, TLS and address", mutate: func(i *networkingv1.Ingress) {
			i.Spec.IngressClassName = new("tranche")
			i.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"web.example.com"}}}
			i.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "127.0.10.2"}, {IP: "127.0.10.1"}, {IP: "127.0.10.1"}}
		}, want: []interface{}{"web", "tranche", "web.example.com", "127.0.10.1,12...", "80, 443", "5m"}},
		{name: "hostname address", mutate: func(i *networkingv1.Ingress) {
			i.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{Hostname: "lb.local"}}
		}, want: []interface{}{"web", "<none>", "web.example.com", "lb.local", "80", "5m"}},
		{name: "no host", mutate: func(i *networkingv1.Ingress) { i.Spec.Rules[0].Host = "" },
			want: []interface{}{"web", "<none>", "*", "", "80", "5m"}},
		{name: "five hosts", mutate: func(i *networkingv1.Ingress) {
			i.Spec.Rules = []networkingv1.IngressRule{rule("a.io"), rule(""), rule("b.io"), rule("c.io"), rule("d.io"), rule("e.io")}
		}, want: []interface{}{"web", "<none>", "a.io,b.io,c.io + 3 more...", "", "80", "5m"}},
	}
	r := IngressResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Row(makeIngress(tc.mutate), now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
			if len(got) != len(r.Columns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(r.Columns))
			}
		})
	}
}

// makeClass returns a valid IngressClass, changed by mutate.
func makeClass(mutate func(*networkingv1.IngressClass)) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "tranche", CreationTimestamp: metav1.NewTime(created)},
		Spec:       networkingv1.IngressClassSpec{Controller: "tranche.dev/ingress"},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestValidateIngressClass(t *testing.T) {
	params := func(p networkingv1.IngressClassParametersReference) func(*networkingv1.IngressClass) {
		return func(c *networkingv1.IngressClass) { c.Spec.Parameters = &p }
	}
	tests := []struct {
		name   string
		mutate func(*networkingv1.IngressClass)
		want   []string
	}{
		{name: "valid"},
		{name: "controller required", mutate: func(c *networkingv1.IngressClass) { c.Spec.Controller = "" },
			want: []string{"spec.controller: Required value"}},
		{name: "controller without domain", mutate: func(c *networkingv1.IngressClass) { c.Spec.Controller = "ingress" },
			want: []string{`spec.controller: Invalid value: "ingress": must be a domain-prefixed path (such as "acme.io/foo")`}},
		{name: "namespaced parameters", mutate: params(networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: new(networkingv1.IngressClassParametersReferenceScopeNamespace), Namespace: new("default"),
		})},
		{name: "namespace scope without namespace", mutate: params(networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: new(networkingv1.IngressClassParametersReferenceScopeNamespace),
		}), want: []string{"spec.parameters.namespace: Required value: `parameters.scope` is set to 'Namespace'"}},
		{name: "cluster scope with namespace", mutate: params(networkingv1.IngressClassParametersReference{
			Kind: "Config", Name: "c", Scope: new(networkingv1.IngressClassParametersReferenceScopeCluster), Namespace: new("default"),
		}), want: []string{"spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'"}},
		{name: "bad scope", mutate: params(networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c", Scope: new("World")}),
			want: []string{`spec.parameters.scope: Unsupported value: "World": supported values: "Cluster", "Namespace"`}},
	}
	r := IngressClassResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := makeClass(tc.mutate)
			r.Default(c)
			got := errStrings(r.Validate(c))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIngressClassUpdateAndDefaults(t *testing.T) {
	r := IngressClassResource()
	got := errStrings(r.ValidateUpdate(makeClass(func(c *networkingv1.IngressClass) { c.Spec.Controller = "example.com/other" }), makeClass(nil)))
	want := []string{`spec.controller: Invalid value: "example.com/other": field is immutable`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	c := makeClass(func(c *networkingv1.IngressClass) {
		c.Spec.Parameters = &networkingv1.IngressClassParametersReference{Kind: "Config", Name: "c"}
	})
	r.Default(c)
	if c.Spec.Parameters.Scope == nil || *c.Spec.Parameters.Scope != networkingv1.IngressClassParametersReferenceScopeCluster {
		t.Errorf("scope not defaulted to Cluster: %v", c.Spec.Parameters.Scope)
	}
}

func TestIngressClassRow(t *testing.T) {
	r := IngressClassResource()
	now := created.Add(3 * time.Hour)
	if diff := cmp.Diff([]interface{}{"tranche", "tranche.dev/ingress", "<none>", "3h"}, r.Row(makeClass(nil), now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
	withParams := makeClass(func(c *networkingv1.IngressClass) {
		c.Spec.Parameters = &networkingv1.IngressClassParametersReference{APIGroup: new("k8s.example.com"), Kind: "IngressParameters", Name: "external-lb"}
	})
	if diff := cmp.Diff([]interface{}{"tranche", "tranche.dev/ingress", "IngressParameters.k8s.example.com/external-lb", "3h"}, r.Row(withParams, now)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func TestNetworkingHooksTolerateNil(t *testing.T) {
	var ing *networkingv1.Ingress
	var class *networkingv1.IngressClass
	ir, cr := IngressResource(), IngressClassResource()
	ir.PrepareForCreate(ing)
	cr.Default(class)
	for _, errs := range []field.ErrorList{
		ir.Validate(ing), ir.ValidateUpdate(ing, ing), ir.Status.ValidateUpdate(ing, ing),
		cr.Validate(class), cr.ValidateUpdate(class, class),
	} {
		if errs != nil {
			t.Errorf("nil object gave %v", errs)
		}
	}
	if ir.Row(class, created) != nil || cr.Row(ing, created) != nil || ir.Warnings(ing, nil) != nil {
		t.Errorf("foreign objects produced output")
	}
}
