package networking

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makeServiceCIDR(cidrs ...string) *networkingv1.ServiceCIDR {
	return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra", CreationTimestamp: metav1.NewTime(created)},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func TestValidateServiceCIDR(t *testing.T) {
	tests := []struct {
		name  string
		cidrs []string
		want  []string
	}{
		{name: "IPv4", cidrs: []string{"10.96.0.0/12"}},
		{name: "dual stack", cidrs: []string{"10.96.0.0/12", "fd00:10:96::/112"}},
		{name: "none", want: []string{"spec.cidrs: Required value: at least one CIDR required"}},
		{name: "three", cidrs: []string{"10.0.0.0/24", "10.1.0.0/24", "fd00::/64"},
			want: []string{`spec.cidrs: Invalid value: {"cidrs":["10.0.0.0/24","10.1.0.0/24","fd00::/64"]}: may only hold up to 2 values`}},
		{name: "not a CIDR", cidrs: []string{"10.0.0.1"},
			want: []string{`spec.cidrs[0]: Invalid value: "10.0.0.1": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)`}},
		{name: "host bits set", cidrs: []string{"10.0.0.1/24"},
			want: []string{`spec.cidrs[0]: Invalid value: "10.0.0.1/24": must not have bits set beyond the prefix length`}},
		{name: "same family twice", cidrs: []string{"10.0.0.0/24", "10.1.0.0/24"},
			want: []string{`spec.cidrs: Invalid value: ["10.0.0.0/24","10.1.0.0/24"]: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ServiceCIDRResource().Validate(makeServiceCIDR(tc.cidrs...)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceCIDRUpdate(t *testing.T) {
	tests := []struct {
		name     string
		old, new []string
		want     []string
	}{
		{name: "unchanged", old: []string{"10.0.0.0/24"}, new: []string{"10.0.0.0/24"}},
		{name: "changed", old: []string{"10.0.0.0/24"}, new: []string{"10.1.0.0/24"},
			want: []string{`spec.cidrs[0]: Invalid value: "10.1.0.0/24": field is immutable`}},
		{name: "other family added", old: []string{"10.0.0.0/24"}, new: []string{"10.0.0.0/24", "fd00::/64"}},
		{name: "same family added", old: []string{"10.0.0.0/24"}, new: []string{"10.0.0.0/24", "10.1.0.0/24"},
			want: []string{`spec.cidrs: Invalid value: ["10.0.0.0/24","10.1.0.0/24"]: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64`}},
		{name: "one removed", old: []string{"10.0.0.0/24", "fd00::/64"}, new: []string{"10.0.0.0/24"},
			want: []string{`spec.cidrs: Invalid value: ["10.0.0.0/24"]: field is immutable`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(ServiceCIDRResource().ValidateUpdate(makeServiceCIDR(tc.new...), makeServiceCIDR(tc.old...)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceCIDRStrategy(t *testing.T) {
	r := ServiceCIDRResource()
	c := makeServiceCIDR("10.0.0.0/24", "fd00::/64")
	c.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	r.PrepareForCreate(c)
	if len(c.Status.Conditions) != 0 {
		t.Error("status kept on create")
	}
	if r.Status == nil || r.Namespaced {
		t.Error("ServiceCIDR must be cluster-scoped with a status subresource")
	}
	if diff := cmp.Diff([]interface{}{"extra", "10.0.0.0/24,fd00::/64", "5m"}, r.Row(c, created.Add(5*time.Minute))); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}

func makeIPAddress(name string, mutate func(*networkingv1.ParentReference)) *networkingv1.IPAddress {
	ip := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "web"}}}
	if mutate != nil {
		mutate(ip.Spec.ParentRef)
	}
	return ip
}

func TestValidateIPAddress(t *testing.T) {
	r := IPAddressResource()
	tests := []struct {
		name   string
		mutate func(*networkingv1.ParentReference)
		want   []string
	}{
		{name: "service"},
		{name: "group", mutate: func(p *networkingv1.ParentReference) { p.Group = "mygroup" }},
		{name: "bad group", mutate: func(p *networkingv1.ParentReference) { p.Group = "My_Group" },
			want: []string{`spec.parentRef.group: Invalid value: "My_Group": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{name: "no resource or name", mutate: func(p *networkingv1.ParentReference) { p.Resource, p.Name = "", "" },
			want: []string{"spec.parentRef.resource: Required value", "spec.parentRef.name: Required value"}},
		{name: "name with a slash", mutate: func(p *networkingv1.ParentReference) { p.Name = "a/b" },
			want: []string{`spec.parentRef.name: Invalid value: "a/b": may not contain '/'`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errStrings(r.Validate(makeIPAddress("10.96.0.20", tc.mutate)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	noRef := makeIPAddress("10.96.0.20", nil)
	noRef.Spec.ParentRef = nil
	if diff := cmp.Diff([]string{"spec.parentRef: Required value"}, errStrings(r.Validate(noRef))); diff != "" {
		t.Errorf("no parentRef (-want +got):\n%s", diff)
	}
	for name, want := range map[string]int{"10.96.0.20": 0, "fe80::42:1dff:fe84:f9e2": 0, "010.96.0.20": 1, "web": 1} {
		if got := len(r.NameValidation(name, false)); got != want {
			t.Errorf("name %q: %d errors, want %d", name, got, want)
		}
	}
	got := errStrings(r.ValidateUpdate(makeIPAddress("10.96.0.20", func(p *networkingv1.ParentReference) { p.Name = "db" }), makeIPAddress("10.96.0.20", nil)))
	if len(got) != 1 || got[0][:33] != "spec.parentRef: Invalid value: {\"" {
		t.Errorf("parentRef change: %q", got)
	}
	if diff := cmp.Diff([]interface{}{"fe80::1", "myresources.mygroup/foo/bar"}, r.Row(makeIPAddress("fe80::1", func(p *networkingv1.ParentReference) {
		p.Group, p.Resource, p.Namespace, p.Name = "mygroup", "myresources", "foo", "bar"
	}), created)); diff != "" {
		t.Errorf("row (-want +got):\n%s", diff)
	}
}
