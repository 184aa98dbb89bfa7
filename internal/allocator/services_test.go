package allocator_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tranche/tranche/internal/allocator"
	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry"
	"github.com/tranche/tranche/internal/registry/core"
	"github.com/tranche/tranche/internal/registry/networking"
	"github.com/tranche/tranche/internal/storage"
	"github.com/tranche/tranche/internal/storage/memory"
)

type fixture struct {
	store  *memory.Store
	alloc  *allocator.Services
	client kubernetes.Interface
	ctx    context.Context
}

func newFixture(t *testing.T, cidr string) *fixture {
	t.Helper()
	store := memory.New(time.Second)
	alloc := &allocator.Services{CIDR: netip.MustParsePrefix(cidr), Ports: allocator.PortRange{First: 30000, Last: 32767},
		Reserved: []netip.Addr{netip.MustParseAddr("10.96.0.10")}, Store: store}
	api, err := apiserver.New(apiserver.Config{Storage: store, Admitters: []apiserver.Admitter{alloc},
		Resources: []registry.Resource{core.NamespaceResource(), core.ServiceResource(), networking.IPAddressResource(), networking.ServiceCIDRResource()}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := &fixture{store: store, alloc: alloc, client: kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, QPS: -1}), ctx: ctx}
	if _, err := f.client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

func makeService(name string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []v1.ServicePort{{Port: 80}}}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func (f *fixture) keys(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, p := range []string{allocator.IPPrefix, allocator.PortPrefix} {
		res, err := f.store.List(f.ctx, p, storage.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range res.Items {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(kv.Key, allocator.IPPrefix), allocator.PortPrefix))
		}
	}
	return out
}

func TestClusterIPAllocation(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	svcs := f.client.CoreV1().Services("default")
	cases := []struct {
		name    string
		svc     *v1.Service
		wantIP  string // "" = any in range, "None" = headless
		wantErr string
	}{
		{"random", makeService("random", nil), "", ""},
		{"explicit", makeService("explicit", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.5.5" }), "10.96.5.5", ""},
		{"explicit taken", makeService("taken", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.5.5" }), "",
			`spec.clusterIPs: Invalid value: ["10.96.5.5"]: failed to allocate IP 10.96.5.5: provided IP is already allocated`},
		{"out of range", makeService("outside", func(s *v1.Service) { s.Spec.ClusterIP = "192.168.1.1" }), "",
			`failed to allocate IP 192.168.1.1: the provided IP (192.168.1.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12`},
		{"reserved on request", makeService("dns", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.0.10" }), "10.96.0.10", ""},
		{"headless", makeService("headless", func(s *v1.Service) { s.Spec.ClusterIP = "None" }), "None", ""},
		{"external name", makeService("ext", func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeExternalName
			s.Spec.ExternalName = "example.com"
			s.Spec.Selector = nil
		}), "-", ""},
	}
	cidr := netip.MustParsePrefix("10.96.0.0/12")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := svcs.Create(f.ctx, tc.svc, metav1.CreateOptions{})
			if tc.wantErr != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want Invalid containing %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch tc.wantIP {
			case "":
				ip := netip.MustParseAddr(got.Spec.ClusterIP)
				if !cidr.Contains(ip) || got.Spec.ClusterIPs[0] != got.Spec.ClusterIP {
					t.Fatalf("allocated %s / %v", got.Spec.ClusterIP, got.Spec.ClusterIPs)
				}
			case "-":
				if got.Spec.ClusterIP != "" {
					t.Fatalf("ExternalName got clusterIP %q", got.Spec.ClusterIP)
				}
			default:
				if got.Spec.ClusterIP != tc.wantIP {
					t.Fatalf("clusterIP %q, want %q", got.Spec.ClusterIP, tc.wantIP)
				}
			}
		})
	}
	// Deleting frees the address for the next Service.
	if err := svcs.Delete(f.ctx, "explicit", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs.Create(f.ctx, makeService("again", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.5.5" }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a freed IP must be reusable: %v", err)
	}
}

func TestRandomNeverPicksSpecialAddresses(t *testing.T) {
	f := newFixture(t, "10.96.0.0/29") // 8 addresses: .0 network, .1 kubernetes, .7 broadcast
	svcs := f.client.CoreV1().Services("default")
	seen := map[string]bool{}
	for i := 0; i < 5; i++ {
		got, err := svcs.Create(f.ctx, makeService(fmt.Sprintf("s%d", i), nil), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seen[got.Spec.ClusterIP] = true
	}
	for _, bad := range []string{"10.96.0.0", "10.96.0.1", "10.96.0.7"} {
		if seen[bad] {
			t.Errorf("allocated %s", bad)
		}
	}
	_, err := svcs.Create(f.ctx, makeService("full", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "range is full") {
		t.Fatalf("full range: %v", err)
	}
}

func TestConcurrentCreatesGetDistinctIPs(t *testing.T) {
	f := newFixture(t, "10.96.0.0/24")
	svcs := f.client.CoreV1().Services("default")
	var mu sync.Mutex
	ips := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got, err := svcs.Create(f.ctx, makeService(fmt.Sprintf("c%d", i), nil), metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := ips[got.Spec.ClusterIP]; dup {
				errs <- fmt.Errorf("%s and %s share %s", other, got.Name, got.Spec.ClusterIP)
			}
			ips[got.Spec.ClusterIP] = got.Name
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(ips) != 200 || len(f.keys(t)) != 200 {
		t.Fatalf("%d distinct IPs, %d allocation keys; want 200 each", len(ips), len(f.keys(t)))
	}
}

func TestNodePortsAndTypeTransitions(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	svcs := f.client.CoreV1().Services("default")
	np, err := svcs.Create(f.ctx, makeService("np", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
	}), metav1.CreateOptions{})
	if err != nil || np.Spec.Ports[0].NodePort != 30080 {
		t.Fatalf("explicit nodePort: %v %v", err, np)
	}
	for _, tc := range []struct {
		port int32
		want string
	}{
		{30080, "spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"},
		{80, "spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid range. The range of valid ports is 30000-32767"},
	} {
		_, err := svcs.Create(f.ctx, makeService(fmt.Sprintf("np%d", tc.port), func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = tc.port
		}), metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("nodePort %d: want %q, got %v", tc.port, tc.want, err)
		}
	}

	// ClusterIP -> NodePort allocates a port; NodePort -> ClusterIP frees it.
	c, err := svcs.Create(f.ctx, makeService("trans", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Type = v1.ServiceTypeNodePort
	c, err = svcs.Update(f.ctx, c, metav1.UpdateOptions{})
	if err != nil || c.Spec.Ports[0].NodePort == 0 {
		t.Fatalf("ClusterIP -> NodePort: %v %+v", err, c)
	}
	port := fmt.Sprint(c.Spec.Ports[0].NodePort)
	c.Spec.Type = v1.ServiceTypeClusterIP
	c.Spec.Ports[0].NodePort = 0
	c, err = svcs.Update(f.ctx, c, metav1.UpdateOptions{})
	if err != nil || c.Spec.Ports[0].NodePort != 0 {
		t.Fatalf("NodePort -> ClusterIP: %v %+v", err, c)
	}
	for _, k := range f.keys(t) {
		if k == port {
			t.Fatalf("port %s still allocated after NodePort -> ClusterIP", port)
		}
	}
	// ClusterIP -> ExternalName frees the IP; ExternalName -> ClusterIP allocates one.
	ip := c.Spec.ClusterIP
	c.Spec.Type = v1.ServiceTypeExternalName
	c.Spec.ExternalName = "db.example.com"
	c, err = svcs.Update(f.ctx, c, metav1.UpdateOptions{})
	if err != nil || c.Spec.ClusterIP != "" {
		t.Fatalf("ClusterIP -> ExternalName: %v %+v", err, c.Spec)
	}
	for _, k := range f.keys(t) {
		if k == ip {
			t.Fatalf("IP %s still allocated after -> ExternalName", ip)
		}
	}
	c.Spec.Type = v1.ServiceTypeClusterIP
	c.Spec.ExternalName = ""
	c, err = svcs.Update(f.ctx, c, metav1.UpdateOptions{})
	if err != nil || c.Spec.ClusterIP == "" {
		t.Fatalf("ExternalName -> ClusterIP: %v %+v", err, c.Spec)
	}
	// NodePort -> ExternalName frees the ports.
	np.Spec.Type = v1.ServiceTypeExternalName
	np.Spec.ExternalName = "x.example.com"
	np.Spec.Selector = nil
	if _, err := svcs.Update(f.ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.keys(t) {
		if k == "30080" {
			t.Fatal("30080 still allocated after NodePort -> ExternalName")
		}
	}
}

func TestRepair(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	svcs := f.client.CoreV1().Services("default")
	s, err := svcs.Create(f.ctx, makeService("kept", func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort }), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A leaked key and a lost one.
	if _, err := f.store.Create(f.ctx, allocator.IPPrefix+"10.96.9.9", []byte(`{"namespace":"default","name":"gone","uid":"x"}`)); err != nil {
		t.Fatal(err)
	}
	kv, err := f.store.Get(f.ctx, allocator.IPPrefix+s.Spec.ClusterIP)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Delete(f.ctx, kv.Key, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.alloc.Repair(f.ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(f.keys(t), ",")
	want := s.Spec.ClusterIP + "," + fmt.Sprint(s.Spec.Ports[0].NodePort)
	if got != want {
		t.Fatalf("after repair keys %q, want %q", got, want)
	}
}

// ipAddresses lists the IPAddress objects as "name parentRef managed-by".
func (f *fixture) ipAddresses(t *testing.T) []string {
	t.Helper()
	list, err := f.client.NetworkingV1().IPAddresses().List(f.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ip := range list.Items {
		ref := ip.Spec.ParentRef
		out = append(out, fmt.Sprintf("%s %s/%s/%s/%s %s", ip.Name, ref.Group, ref.Resource, ref.Namespace, ref.Name, ip.Labels[networkingv1.LabelManagedBy]))
	}
	return out
}

// TestIPAddressObjects: each ClusterIP is published as the IPAddress kube-apiserver's
// allocator makes (named by the address, parentRef the Service, its labels), created
// and deleted with the Service; an IPAddress someone made takes its address.
func TestIPAddressObjects(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	svcs := f.client.CoreV1().Services("default")
	s, err := svcs.Create(f.ctx, makeService("web", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := f.client.NetworkingV1().IPAddresses().Get(f.ctx, s.Spec.ClusterIP, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if obj.UID == "" || obj.CreationTimestamp.IsZero() || obj.ResourceVersion == "" ||
		obj.Labels[networkingv1.LabelIPAddressFamily] != "IPv4" || obj.Labels[networkingv1.LabelManagedBy] != allocator.ManagedBy {
		t.Fatalf("IPAddress %s: %+v", s.Spec.ClusterIP, obj.ObjectMeta)
	}
	if got, want := f.ipAddresses(t), []string{s.Spec.ClusterIP + " /services/default/web ipallocator.k8s.io"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("IPAddresses %q, want %q", got, want)
	}
	s.Spec.Type = v1.ServiceTypeExternalName
	s.Spec.ExternalName = "example.com"
	s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.Selector = "", nil, nil
	if _, err := svcs.Update(f.ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.ipAddresses(t); len(got) != 0 {
		t.Fatalf("IPAddresses after the Service became ExternalName: %q", got)
	}
	if _, err := svcs.Create(f.ctx, makeService("api", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.7.7" }), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svcs.Delete(f.ctx, "api", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := f.ipAddresses(t); len(got) != 0 {
		t.Fatalf("IPAddresses after the Service was deleted: %q", got)
	}
	mine := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "10.96.5.5"},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Group: "gateway.networking.k8s.io", Resource: "gateways", Namespace: "default", Name: "gw"}}}
	if _, err := f.client.NetworkingV1().IPAddresses().Create(f.ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = svcs.Create(f.ctx, makeService("taken", func(s *v1.Service) { s.Spec.ClusterIP = "10.96.5.5" }), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate IP 10.96.5.5: provided IP is already allocated") {
		t.Fatalf("create on an address an IPAddress names: %v, want Invalid 'provided IP is already allocated'", err)
	}
}

// TestRepairIPAddresses: at start-up a held ClusterIP without its IPAddress (data from
// before they existed, or one deleted by hand) gets it back, the allocator's IPAddress of
// an address nobody holds goes, and one someone else made stays.
func TestRepairIPAddresses(t *testing.T) {
	f := newFixture(t, "10.96.0.0/12")
	s, err := f.client.CoreV1().Services("default").Create(f.ctx, makeService("kept", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := f.client.NetworkingV1().IPAddresses()
	if err := ips.Delete(f.ctx, s.Spec.ClusterIP, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []*networkingv1.IPAddress{
		{ObjectMeta: metav1.ObjectMeta{Name: "10.96.9.9", Labels: map[string]string{networkingv1.LabelManagedBy: allocator.ManagedBy}},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: "default", Name: "gone"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "10.96.8.8"},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "gateways", Namespace: "default", Name: "gw"}}},
	} {
		if _, err := ips.Create(f.ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.alloc.Repair(f.ctx, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	got := f.ipAddresses(t)
	want := []string{s.Spec.ClusterIP + " /services/default/kept ipallocator.k8s.io", "10.96.8.8 /gateways/default/gw "}
	slices.Sort(got)
	slices.Sort(want)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("IPAddresses after repair %q, want %q", got, want)
	}
}

// TestOtherServiceCIDRs: once the cluster's own range is full, ClusterIPs come from the
// other ServiceCIDR objects (not from one being deleted); an explicit address in any of
// them is accepted, one outside all is refused naming them.
func TestOtherServiceCIDRs(t *testing.T) {
	f := newFixture(t, "10.96.0.0/29")
	svcs := f.client.CoreV1().Services("default")
	// .0 is the network, .1 the kubernetes Service's, .7 broadcast: five addresses.
	for i := range 5 {
		if _, err := svcs.Create(f.ctx, makeService(fmt.Sprintf("s%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := svcs.Create(f.ctx, makeService("full", nil), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failed to allocate a serviceIP: range is full (10.96.0.0/29)") {
		t.Fatalf("create with the range full: %v", err)
	}
	cidrs := f.client.NetworkingV1().ServiceCIDRs()
	dying := &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "a-dying", Finalizers: []string{"example.com/hold"}},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.99.0.0/24"}}}
	if _, err := cidrs.Create(f.ctx, dying, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cidrs.Delete(f.ctx, dying.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cidrs.Create(f.ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "extra"},
		Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.100.0.0/28"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := svcs.Create(f.ctx, makeService("full", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := netip.MustParseAddr(got.Spec.ClusterIP); !netip.MustParsePrefix("10.100.0.0/28").Contains(ip) || ip == netip.MustParseAddr("10.100.0.0") {
		t.Fatalf("allocated %s, want a host of 10.100.0.0/28", ip)
	}
	// An address of the new range that the dynamic allocation above did not take (it
	// picks at random, so a fixed .14 collided with it one run in fourteen).
	explicit := "10.100.0.14"
	if got.Spec.ClusterIP == explicit {
		explicit = "10.100.0.13"
	}
	if _, err := svcs.Create(f.ctx, makeService("explicit", func(s *v1.Service) { s.Spec.ClusterIP = explicit }), metav1.CreateOptions{}); err != nil {
		t.Fatalf("explicit address of another ServiceCIDR: %v", err)
	}
	_, err = svcs.Create(f.ctx, makeService("dying", func(s *v1.Service) { s.Spec.ClusterIP = "10.99.0.5" }), metav1.CreateOptions{})
	want := "failed to allocate IP 10.99.0.5: the provided IP (10.99.0.5) is not in the valid range. The range of valid IPs is 10.96.0.0/29, 10.100.0.0/28"
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("explicit address of a ServiceCIDR being deleted: %v, want Invalid %q", err, want)
	}
}
