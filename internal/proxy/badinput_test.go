package proxy

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/knftables"
)

// event is one Event as the test recorder saw it.
type event struct {
	Object, Type, Reason, Message string
}

// eventLog is an EventRecorder that keeps the Events. Like client-go's recorder, it
// resolves the object's reference through the client-go scheme, so an object the real
// recorder could not refer to shows up as an error here.
type eventLog struct {
	mu     sync.Mutex
	events []event
}

var _ EventRecorder = (*eventLog)(nil)

func (l *eventLog) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	ref, err := reference.GetReference(scheme.Scheme, obj)
	name := ""
	if err != nil {
		name = "unreferenceable: " + err.Error()
	} else {
		name = ref.Kind + " " + ref.Namespace + "/" + ref.Name
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, event{name, typ, reason, fmt.Sprintf(format, args...)})
}

// take returns the Events recorded since the last take.
func (l *eventLog) take() []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

// refusingNFT is a knftables.Fake behind a kernel that lacks something: Run and Check
// refuse, with an error shaped like nft's, every transaction holding a line that
// refuse matches, or holding all the strings of together, and otherwise do what the
// fake does.
type refusingNFT struct {
	*knftables.Fake
	refuse   func(line string) bool
	together []string
	// runs and checks count the calls, refused ones included.
	runs, checks int
}

var _ knftables.Interface = (*refusingNFT)(nil)

func (r *refusingNFT) refused(tx *knftables.Transaction) error {
	text := tx.String()
	if len(r.together) > 0 && !slices.ContainsFunc(r.together, func(s string) bool { return !strings.Contains(text, s) }) {
		return fmt.Errorf("exit status 1: Error: Could not process rule: Too many open files in system")
	}
	if r.refuse == nil {
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		if r.refuse(line) {
			return fmt.Errorf("exit status 1: /dev/stdin:%d:1-%d: Error: Could not process rule: Protocol not supported\n%s", i+1, len(line), line)
		}
	}
	return nil
}

func (r *refusingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	r.runs++
	if err := r.refused(tx); err != nil {
		return err
	}
	return r.Fake.Run(ctx, tx)
}

func (r *refusingNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	r.checks++
	if err := r.refused(tx); err != nil {
		return err
	}
	return r.Fake.Check(ctx, tx)
}

// noSCTP stands for a kernel without SCTP support: it refuses the rules and elements
// that match SCTP traffic.
func noSCTP(line string) bool {
	return strings.Contains(line, " . sctp . ") || strings.Contains(line, "l4proto sctp")
}

// badInputProxier is a test proxier writing to nft, with its Events and its log.
type badInputProxier struct {
	*Proxier
	events *eventLog
	log    *bytes.Buffer
	now    time.Time
}

func newBadInputProxier(t *testing.T, nft knftables.Interface) *badInputProxier {
	t.Helper()
	cfg := DefaultConfig(testNode)
	cfg.Zone = "zone-a"
	b := &badInputProxier{events: &eventLog{}, log: &bytes.Buffer{}, now: time.Unix(1_800_000_000, 0)}
	p, err := NewProxier(nft, ProxierConfig{Config: cfg, Registerer: prometheus.NewRegistry(), Recorder: b.events,
		Logger: slog.New(slog.NewTextHandler(b.log, nil)), Now: func() time.Time { return b.now }})
	if err != nil {
		t.Fatal(err)
	}
	b.Proxier = p
	return b
}

// logLines counts the log lines containing s.
func (b *badInputProxier) logLines(s string) int { return strings.Count(b.log.String(), s) }

// dumpOf returns the table a proxier that never saw bad input writes for svcs and
// slices: what the proxier under test must hold besides what it skipped.
func dumpOf(t *testing.T, svcs []*v1.Service, slices []*discoveryv1.EndpointSlice) string {
	t.Helper()
	p, fake := newTestProxier(t)
	for _, s := range svcs {
		p.OnServiceAdd(s)
	}
	for _, s := range slices {
		p.OnEndpointSliceAdd(s)
	}
	mustSync(t, p)
	return fake.Dump()
}

// TestUnusableEndpointAddresses: an endpoint whose address the proxy cannot use is
// skipped with one Warning Event on its slice, naming the field and the address; the
// slice's other endpoints and every other service stay programmed, exactly as if the
// bad endpoint had never been listed.
func TestUnusableEndpointAddresses(t *testing.T) {
	tests := []struct {
		name, address, reason string
	}{
		{"unparseable", "10.244.1.300", "not an IP address"},
		{"not an address at all", "web.example.com", "not an IP address"},
		{"IPv6 in an IPv4 slice", "fd00::7", "not an IPv4 address, as the slice's addressType IPv4 requires"},
		{"IPv4-mapped IPv6", "::ffff:10.244.1.7", "not an IPv4 address, as the slice's addressType IPv4 requires"},
		{"unspecified", "0.0.0.0", "the unspecified address"},
		{"loopback", "127.0.0.1", "a loopback address, which would be the node itself"},
		{"multicast", "239.1.2.3", "a multicast address"},
		{"link-local multicast", "224.0.0.5", "a multicast address"},
		{"broadcast", "255.255.255.255", "the broadcast address"},
		{"link-local", "169.254.169.254", "a link-local address, which belongs to the node's own link"},
		{"a ClusterIP", "10.96.0.21", "inside the service CIDR 10.96.0.0/12: a connection is translated once, so a Service address cannot be a backend"},
		{"elsewhere in the service CIDR", "10.100.3.4", "inside the service CIDR 10.96.0.0/12: a connection is translated once, so a Service address cannot be a backend"},
	}
	web := makeService("demo", "web", "10.96.0.20", nil)
	other := makeService("demo", "other", "10.96.0.21", nil)
	otherSlice := makeSlice("demo", "other", "other-1", httpPorts, ready("10.244.2.9", "node-b"))
	good := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	want := dumpOf(t, []*v1.Service{web, other}, []*discoveryv1.EndpointSlice{good, otherSlice})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := knftables.NewFake(knftables.IPv4Family, TableName)
			p := newBadInputProxier(t, fake)
			p.OnServiceAdd(web)
			p.OnServiceAdd(other)
			p.OnEndpointSliceAdd(otherSlice)
			p.OnEndpointSliceAdd(makeSlice("demo", "web", "web-1", httpPorts,
				ready("10.244.1.2", testNode), ready(tc.address, testNode), ready("10.244.2.2", "node-b")))
			mustSync(t, p.Proxier)
			if d := cmp.Diff(want, fake.Dump()); d != "" {
				t.Errorf("table differs from the one without the bad endpoint (-want +got):\n%s", d)
			}
			if got, want := trace(t, fake, pkt("10.244.1.9", "10.96.0.20", "tcp", 80)), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080"; got != want {
				t.Errorf("web: %s, want %s", got, want)
			}
			if got, want := trace(t, fake, pkt("10.244.1.9", "10.96.0.21", "tcp", 80)), "accept dnat 10.244.2.9:8080"; got != want {
				t.Errorf("other: %s, want %s", got, want)
			}
			wantEvents := []event{{"EndpointSlice demo/web-1", v1.EventTypeWarning, ReasonUnusableEndpointAddress,
				fmt.Sprintf("the service proxy on node node-a skips what it cannot send traffic to: endpoints[1].addresses[0] %q: %s", tc.address, tc.reason)}}
			if d := cmp.Diff(wantEvents, p.events.take()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if n := p.logLines("skipping unusable endpoint addresses"); n != 1 {
				t.Errorf("%d log lines about the bad address, want 1:\n%s", n, p.log)
			}
		})
	}
}

// TestUnusableAddressReportedOnce: a slice keeping a bad address through other changes,
// or delivered again unchanged, is not reported again; a new bad address is; one that
// is fixed and comes back is reported again, as is a deleted slice created anew.
func TestUnusableAddressReportedOnce(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	p := newBadInputProxier(t, fake)
	p.OnServiceAdd(makeService("demo", "web", "10.96.0.20", nil))
	version := func(bad string, secondReady bool) *discoveryv1.EndpointSlice {
		second := ready("10.244.2.2", "node-b")
		second.ready = secondReady
		eps := []ep{ready("10.244.1.2", testNode), second}
		if bad != "" {
			eps = append(eps, ready(bad, "node-b"))
		}
		return makeSlice("demo", "web", "web-1", httpPorts, eps...)
	}
	steps := []struct {
		what    string
		slice   *discoveryv1.EndpointSlice
		deleted bool
		// reported is the bad address the step must report ("" for none).
		reported string
	}{
		{"created with a multicast address", version("239.1.2.3", true), false, "239.1.2.3"},
		{"another endpoint turns unready", version("239.1.2.3", false), false, ""},
		{"delivered again unchanged", version("239.1.2.3", false), false, ""},
		{"the bad address changes", version("127.0.0.1", false), false, "127.0.0.1"},
		{"fixed", version("", true), false, ""},
		{"broken again", version("127.0.0.1", true), false, "127.0.0.1"},
		{"deleted", version("127.0.0.1", true), true, ""},
		{"created anew", version("127.0.0.1", true), false, "127.0.0.1"},
	}
	reports := 0
	for _, s := range steps {
		if s.deleted {
			p.OnEndpointSliceDelete(s.slice)
		} else {
			p.OnEndpointSliceUpdate(nil, s.slice)
		}
		mustSync(t, p.Proxier)
		var want []event
		if s.reported != "" {
			reports++
			_, why := endpointAddress(s.reported, DefaultConfig(testNode).ServiceCIDR)
			want = []event{{"EndpointSlice demo/web-1", v1.EventTypeWarning, ReasonUnusableEndpointAddress,
				fmt.Sprintf("the service proxy on node node-a skips what it cannot send traffic to: endpoints[2].addresses[0] %q: %s", s.reported, why)}}
		}
		if d := cmp.Diff(want, p.events.take()); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", s.what, d)
		}
		if n := p.logLines("skipping unusable endpoint addresses"); n != reports {
			t.Errorf("%s: %d log lines about bad addresses so far, want %d", s.what, n, reports)
		}
	}
	if got, want := trace(t, fake, pkt("10.244.1.9", "10.96.0.20", "tcp", 80)), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080"; got != want {
		t.Errorf("web at the end: %s, want %s", got, want)
	}
}

// TestUnusableSlices: an FQDN slice is skipped whole with one Event on addressType;
// an IPv6 slice is another family's business, skipped silently; a slice of many bad
// endpoints makes one Event listing the first few.
func TestUnusableSlices(t *testing.T) {
	many := makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode))
	for i := range 7 {
		many.Endpoints = append(many.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("127.0.0.%d", i+1)}})
	}
	fqdn := makeSlice("demo", "web", "web-fqdn", httpPorts, ready("web.example.com", ""))
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	ipv6 := makeSlice("demo", "web", "web-v6", httpPorts, ready("fd00::7", ""))
	ipv6.AddressType = discoveryv1.AddressTypeIPv6
	loopback := `%q: a loopback address, which would be the node itself`
	tests := []struct {
		name   string
		slice  *discoveryv1.EndpointSlice
		events []event
		trace  string
	}{
		{"FQDN", fqdn, []event{{"EndpointSlice demo/web-fqdn", v1.EventTypeWarning, ReasonUnusableEndpointAddress,
			`the service proxy on node node-a skips what it cannot send traffic to: addressType "FQDN": the service proxy programs IP addresses only; the whole slice is skipped`}},
			"reject tcp-reset"},
		{"IPv6", ipv6, nil, "reject tcp-reset"},
		{"seven bad endpoints", many, []event{{"EndpointSlice demo/web-1", v1.EventTypeWarning, ReasonUnusableEndpointAddress,
			"the service proxy on node node-a skips what it cannot send traffic to: " +
				fmt.Sprintf("endpoints[1].addresses[0] "+loopback+"; ", "127.0.0.1") +
				fmt.Sprintf("endpoints[2].addresses[0] "+loopback+"; ", "127.0.0.2") +
				fmt.Sprintf("endpoints[3].addresses[0] "+loopback+"; ", "127.0.0.3") +
				fmt.Sprintf("endpoints[4].addresses[0] "+loopback+"; ", "127.0.0.4") +
				fmt.Sprintf("endpoints[5].addresses[0] "+loopback+"; ", "127.0.0.5") +
				"and 2 more"}},
			"accept dnat 10.244.1.2:8080"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := knftables.NewFake(knftables.IPv4Family, TableName)
			p := newBadInputProxier(t, fake)
			p.OnServiceAdd(makeService("demo", "web", "10.96.0.20", nil))
			p.OnEndpointSliceAdd(tc.slice)
			mustSync(t, p.Proxier)
			if d := cmp.Diff(tc.events, p.events.take()); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if got := trace(t, fake, pkt("10.244.1.9", "10.96.0.20", "tcp", 80)); got != tc.trace {
				t.Errorf("web: %s, want %s", got, tc.trace)
			}
			p.OnEndpointSliceDelete(tc.slice)
			p.OnEndpointSliceAdd(tc.slice)
			if got := p.events.take(); len(got) != len(tc.events) {
				t.Errorf("the slice created anew made %d events, want %d: %v", len(got), len(tc.events), got)
			}
		})
	}
}

// Services of the kernel refusal tests: web (TCP) and dns (UDP, two endpoints) are
// fine; sctp is what a kernel without SCTP refuses.
var (
	refWeb      = makeService("demo", "web", "10.96.0.20", nil)
	refWebSlice = makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode), ready("10.244.2.2", "node-b"))
	refDNS      = makeService("demo", "dns", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
	})
	refDNSSlice = makeSlice("demo", "dns", "dns-1", []discoveryv1.EndpointPort{port("dns", 5353, v1.ProtocolUDP)},
		ready("10.244.1.3", testNode), ready("10.244.2.3", "node-b"))
	refSCTP = makeService("demo", "sig", "10.96.0.30", func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "sig", Port: 2905, Protocol: v1.ProtocolSCTP}}
	})
	refSCTPSlice = func(ips ...string) *discoveryv1.EndpointSlice {
		var eps []ep
		for _, ip := range ips {
			eps = append(eps, ready(ip, "node-b"))
		}
		return makeSlice("demo", "sig", "sig-1", []discoveryv1.EndpointPort{port("sig", 2905, v1.ProtocolSCTP)}, eps...)
	}
)

// TestKernelRefusalIsolated: when the kernel refuses a full sync because of one
// Service (here SCTP, which it lacks), that Service alone is left out, with one Warning
// Event and one log line, and the table is exactly the one without it. A partial sync
// adding such a Service fails (the table is untouched) and the full sync after it
// isolates the Service. The Service is retried when it changes, by a partial sync
// (isolated again, cheaply, while the kernel still refuses it) and at the next full
// sync; once the kernel takes it, it is programmed.
func TestKernelRefusalIsolated(t *testing.T) {
	fine := []*v1.Service{refWeb, refDNS}
	fineSlices := []*discoveryv1.EndpointSlice{refWebSlice, refDNSSlice}
	withoutSCTP := dumpOf(t, fine, fineSlices)
	refusedEvent := event{"Service demo/sig", v1.EventTypeWarning, ReasonRulesRejected, ""}
	// events checks the Events of a step, the kernel's message aside (see messages).
	events := func(t *testing.T, p *badInputProxier, step string, want ...event) {
		t.Helper()
		got := p.events.take()
		for i := range got {
			if !strings.HasPrefix(got[i].Message, "the kernel of node node-a refused this Service's nftables rules") ||
				!strings.Contains(got[i].Message, "Protocol not supported") {
				t.Errorf("%s: event message does not say what and why: %q", step, got[i].Message)
			}
			got[i].Message = ""
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: events (-want +got):\n%s", step, d)
		}
	}
	table := func(t *testing.T, fake *knftables.Fake, step, want string) {
		t.Helper()
		if d := cmp.Diff(want, fake.Dump()); d != "" {
			t.Errorf("%s: table differs from the one without the refused service (-want +got):\n%s", step, d)
		}
		if got, want := trace(t, fake, pkt("10.244.1.9", "10.96.0.20", "tcp", 80)), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080"; got != want {
			t.Errorf("%s: web: %s, want %s", step, got, want)
		}
		if got, want := trace(t, fake, pkt("10.244.1.9", "10.96.0.10", "udp", 53)), "accept dnat 10.244.1.3:5353 | accept dnat 10.244.2.3:5353"; got != want {
			t.Errorf("%s: dns: %s, want %s", step, got, want)
		}
	}

	t.Run("refused at the first sync", func(t *testing.T) {
		nft := &refusingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName), refuse: noSCTP}
		p := newBadInputProxier(t, nft)
		for _, s := range append(fine, refSCTP) {
			p.OnServiceAdd(s)
		}
		for _, s := range append(fineSlices, refSCTPSlice("10.244.2.7")) {
			p.OnEndpointSliceAdd(s)
		}
		mustSync(t, p.Proxier)
		table(t, nft.Fake, "first sync", withoutSCTP)
		events(t, p, "first sync", refusedEvent)
		if n := p.logLines("the kernel refused a service's rules"); n != 1 {
			t.Errorf("%d log lines about the refused service, want 1:\n%s", n, p.log)
		}
		if got := trace(t, nft.Fake, pkt("10.244.1.9", "10.96.0.30", "sctp", 2905)); got != "drop" {
			t.Errorf("the refused service: %s, want drop (an address of the service CIDR nothing serves)", got)
		}

		// Other services' partial syncs neither retry nor report it again.
		p.OnEndpointSliceUpdate(nil, makeSlice("demo", "web", "web-1", httpPorts, ready("10.244.1.2", testNode)))
		mustSync(t, p.Proxier)
		events(t, p, "a partial sync of another service")
		p.OnEndpointSliceUpdate(nil, refWebSlice)
		mustSync(t, p.Proxier)

		// Its own change retries it: still refused, isolated by the partial sync.
		runs := nft.runs
		p.OnEndpointSliceUpdate(nil, refSCTPSlice("10.244.2.7", "10.244.2.8"))
		mustSync(t, p.Proxier)
		if strings.Contains(nft.LastTransaction.String(), "add table") {
			t.Errorf("a change of the refused service made a full sync:\n%s", nft.LastTransaction)
		}
		if nft.runs != runs+2 {
			t.Errorf("%d transactions for the refused service's change, want 2 (the refused one, then the one without it)", nft.runs-runs)
		}
		table(t, nft.Fake, "the refused service changed", withoutSCTP)
		events(t, p, "the refused service changed", refusedEvent)

		// The next full sync retries it too: the kernel now has SCTP.
		nft.refuse = nil
		p.now = p.now.Add(2 * time.Hour)
		mustSync(t, p.Proxier)
		events(t, p, "full sync with SCTP")
		want := dumpOf(t, append(fine, refSCTP), append(fineSlices, refSCTPSlice("10.244.2.7", "10.244.2.8")))
		if d := cmp.Diff(want, nft.Dump()); d != "" {
			t.Errorf("the service the kernel now takes is not programmed (-want +got):\n%s", d)
		}
		if n := p.logLines("service programmed again after the kernel refused it"); n != 1 {
			t.Errorf("%d log lines about the service programmed again, want 1:\n%s", n, p.log)
		}
	})

	t.Run("added to a running proxy", func(t *testing.T) {
		nft := &refusingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName), refuse: noSCTP}
		p := newBadInputProxier(t, nft)
		for _, s := range fine {
			p.OnServiceAdd(s)
		}
		for _, s := range fineSlices {
			p.OnEndpointSliceAdd(s)
		}
		mustSync(t, p.Proxier)
		p.OnServiceAdd(refSCTP)
		p.OnEndpointSliceAdd(refSCTPSlice("10.244.2.7"))
		if err := p.Sync(context.Background()); err == nil {
			t.Fatal("the partial sync adding the SCTP service succeeded")
		}
		table(t, nft.Fake, "after the refused partial sync", withoutSCTP)
		events(t, p, "after the refused partial sync")
		mustSync(t, p.Proxier) // full, as after any failure
		table(t, nft.Fake, "the full sync after it", withoutSCTP)
		events(t, p, "the full sync after it", refusedEvent)

		// Deleted while refused: forgotten, nothing to report.
		p.OnServiceDelete(refSCTP)
		mustSync(t, p.Proxier)
		events(t, p, "deleted")
		if p.rejected.Len() != 0 {
			t.Errorf("deleted service still remembered as refused: %v", p.rejected)
		}
	})

	t.Run("refused together", func(t *testing.T) {
		// Two SCTP services among many fine ones, at the first sync.
		nft := &refusingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName), refuse: noSCTP}
		p := newBadInputProxier(t, nft)
		var svcs []*v1.Service
		var eps []*discoveryv1.EndpointSlice
		for i := range 40 {
			name := fmt.Sprintf("s%02d", i)
			svc := makeService("demo", name, fmt.Sprintf("10.96.1.%d", i+1), nil)
			slice := makeSlice("demo", name, name+"-1", httpPorts, ready(fmt.Sprintf("10.244.2.%d", i+1), "node-b"))
			if i == 7 || i == 31 {
				svc.Spec.Ports[0].Protocol = v1.ProtocolSCTP
				slice.Ports = []discoveryv1.EndpointPort{port("http", 8080, v1.ProtocolSCTP)}
			} else {
				svcs, eps = append(svcs, svc), append(eps, slice)
			}
			p.OnServiceAdd(svc)
			p.OnEndpointSliceAdd(slice)
		}
		mustSync(t, p.Proxier)
		if d := cmp.Diff(dumpOf(t, svcs, eps), nft.Dump()); d != "" {
			t.Errorf("table differs from the one without the refused services (-want +got):\n%s", d)
		}
		got := p.events.take()
		for i := range got {
			got[i].Message = ""
		}
		want := []event{{"Service demo/s07", v1.EventTypeWarning, ReasonRulesRejected, ""}, {"Service demo/s31", v1.EventTypeWarning, ReasonRulesRejected, ""}}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		// 2 refused out of 40: about 2·2·log2(40) checks, far fewer than one per service.
		if nft.checks > 25 {
			t.Errorf("%d checks to find 2 refused services among 40", nft.checks)
		}
	})

	t.Run("refused only together", func(t *testing.T) {
		// s03 and s06 pass alone and are refused together: the search by groups on the
		// base accepts both, the kernel refuses that table, and the search on top of
		// what was accepted leaves out the later one.
		nft := &refusingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName), together: []string{"10.96.1.4 ", "10.96.1.7 "}}
		p := newBadInputProxier(t, nft)
		var svcs []*v1.Service
		var eps []*discoveryv1.EndpointSlice
		for i := range 10 {
			name := fmt.Sprintf("s%02d", i)
			svc := makeService("demo", name, fmt.Sprintf("10.96.1.%d", i+1), nil)
			slice := makeSlice("demo", name, name+"-1", httpPorts, ready(fmt.Sprintf("10.244.2.%d", i+1), "node-b"))
			if i != 6 {
				svcs, eps = append(svcs, svc), append(eps, slice)
			}
			p.OnServiceAdd(svc)
			p.OnEndpointSliceAdd(slice)
		}
		mustSync(t, p.Proxier)
		if d := cmp.Diff(dumpOf(t, svcs, eps), nft.Dump()); d != "" {
			t.Errorf("table differs from the one without s06 (-want +got):\n%s", d)
		}
		got := p.events.take()
		for i := range got {
			got[i].Message = ""
		}
		if d := cmp.Diff([]event{{"Service demo/s06", v1.EventTypeWarning, ReasonRulesRejected, ""}}, got); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
		if n := p.logLines("looking again, on top of everything accepted"); n != 1 {
			t.Errorf("%d log lines about the second search, want 1", n)
		}
	})

	t.Run("nothing to blame", func(t *testing.T) {
		// A kernel refusing the table itself: no service is at fault, none is left out.
		nft := &refusingNFT{Fake: knftables.NewFake(knftables.IPv4Family, TableName),
			refuse: func(line string) bool { return strings.HasPrefix(line, "add table") }}
		p := newBadInputProxier(t, nft)
		for _, s := range fine {
			p.OnServiceAdd(s)
		}
		err := p.Sync(context.Background())
		if err == nil || !strings.Contains(err.Error(), "without any of the services in question") {
			t.Errorf("Sync = %v, want an error saying no service is to blame", err)
		}
		events(t, p, "refused table")
		if p.rejected.Len() != 0 {
			t.Errorf("services blamed for a refused table: %v", p.rejected)
		}
		nft.refuse = nil
		mustSync(t, p.Proxier)
		if d := cmp.Diff(dumpOf(t, fine, nil), nft.Dump()); d != "" {
			t.Errorf("table once the kernel recovered (-want +got):\n%s", d)
		}
	})
}

// TestServiceWithHundredsOfPorts: Kubernetes sets no limit on a Service's ports, and
// 500 are no bad input: a NodePort Service with 500 ports (1,000 chains of its own) is
// programmed like any other, next to another Service, with no Event.
func TestServiceWithHundredsOfPorts(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, TableName)
	p := newBadInputProxier(t, fake)
	big, bigSlice := hundredsOfPorts(500)
	p.OnServiceAdd(big)
	p.OnEndpointSliceAdd(bigSlice)
	p.OnServiceAdd(refWeb)
	p.OnEndpointSliceAdd(refWebSlice)
	mustSync(t, p.Proxier)
	for _, c := range []traceCase{
		{pkt("10.244.1.9", "10.96.0.40", "tcp", 1), "accept dnat 10.244.2.5:10001"},
		{pkt("10.244.1.9", "10.96.0.40", "tcp", 500), "accept dnat 10.244.2.5:10500"},
		{pkt("192.168.7.1", "10.240.0.2", "tcp", 30500), "accept dnat 10.244.2.5:10500 masquerade"},
		{pkt("10.244.1.9", "10.96.0.40", "tcp", 501), "reject tcp-reset"},
		{pkt("10.244.1.9", "10.96.0.20", "tcp", 80), "accept dnat 10.244.1.2:8080 | accept dnat 10.244.2.2:8080"},
	} {
		if got := trace(t, fake, c.pkt); got != c.want {
			t.Errorf("trace %v -> %v:%d/%s:\n got %s\nwant %s", c.pkt.Src, c.pkt.Dst, c.pkt.DPort, c.pkt.Proto, got, c.want)
		}
	}
	if n := len(fake.Table.Chains); n < 1000 {
		t.Errorf("%d chains, want the 1,000 of the 500 external ports and more", n)
	}
	if got := p.events.take(); len(got) != 0 {
		t.Errorf("events for a valid service: %v", got)
	}
}

// hundredsOfPorts returns a NodePort Service with n TCP ports (1..n, node ports
// 30001.., endpoint ports 10001..) and its slice of one endpoint.
func hundredsOfPorts(n int) (*v1.Service, *discoveryv1.EndpointSlice) {
	svc := makeService("demo", "big", "10.96.0.40", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = nil
		for i := 1; i <= n; i++ {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(i), NodePort: int32(30000 + i), Protocol: v1.ProtocolTCP})
		}
	})
	var ports []discoveryv1.EndpointPort
	for i := 1; i <= n; i++ {
		ports = append(ports, port(fmt.Sprintf("p%d", i), int32(10000+i), v1.ProtocolTCP))
	}
	return svc, makeSlice("demo", "big", "big-1", ports, ready("10.244.2.5", "node-b"))
}

// TestEventRecorderNamesTheNode: the recorder the agent gives its proxy writes core/v1
// Events on the object, from tranche-proxy on the node, through the API.
func TestEventRecorderNamesTheNode(t *testing.T) {
	client := clientfake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := NewEventRecorder(ctx, client, testNode)
	rec.Eventf(refWebSlice, v1.EventTypeWarning, ReasonUnusableEndpointAddress, "skipped %s", "239.1.2.3")
	var got []v1.Event
	for deadline := time.Now().Add(10 * time.Second); len(got) == 0; {
		list, err := client.CoreV1().Events("demo").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = list.Items
		if len(got) == 0 && time.Now().After(deadline) {
			t.Fatal("no Event written within 10s")
		}
		if len(got) == 0 {
			time.Sleep(10 * time.Millisecond) // the broadcaster writes asynchronously
		}
	}
	e := got[0]
	summary := fmt.Sprintf("%s %s/%s %s %s %q from %s@%s reported by %s/%s", e.InvolvedObject.Kind, e.InvolvedObject.Namespace, e.InvolvedObject.Name,
		e.Type, e.Reason, e.Message, e.Source.Component, e.Source.Host, e.ReportingController, e.ReportingInstance)
	want := `EndpointSlice demo/web-1 Warning UnusableEndpointAddress "skipped 239.1.2.3" from tranche-proxy@node-a reported by tranche-proxy/node-a`
	if d := cmp.Diff(want, summary); d != "" {
		t.Errorf("event (-want +got):\n%s", d)
	}
}
