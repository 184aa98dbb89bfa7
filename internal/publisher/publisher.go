// Package publisher is the host publisher of `tranche up`: it makes NodePort and
// LoadBalancer Services reachable from the host, the only way in from outside a local
// cluster. It listens on 127.0.0.1:<nodePort> for every node port and on every
// load-balancer address the servicelb controller wrote in a Service's status
// (127.0.10.0/24 by default), TCP and UDP, and forwards each connection into the
// cluster network: dialled from inside the underlay namespace to a Ready node's
// address and the Service's node port, where the node's proxy takes over, exactly
// as a cloud load balancer reaches a cluster.
//
// The host's root network namespace gets no address, route or rule (DESIGN.md's
// safety rule): loopback listeners need none, since all of 127/8 is local, and the
// only way into the cluster is a socket made inside the underlay namespace.
//
// Ports of other protocols (SCTP) are not published; a Warning Event on the Service
// says so, rather than leave it silently unreachable from the host.
//
// Clients' addresses are not preserved: pods see the underlay's address (10.240.0.1),
// also with externalTrafficPolicy Local, where only the choice of nodes changes.
// The publisher follows Services, EndpointSlices and Nodes through informers and
// re-computes the listeners (Desired, pure) on every change. A port already taken on
// the host is reported in an Event on the Service and a log line, and tried again;
// when it is a load-balancer address, the servicelb controller sharing the publisher's
// Host is told too, and moves the Service to an address the host has free.
package publisher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/tranche/tranche/internal/netns"
)

// Event reasons on Services.
const (
	// ReasonPublished (Normal): a listener was opened on the host.
	ReasonPublished = "Published"
	// ReasonPublishFailed (Warning): a listener could not be opened, or another
	// Service holds it.
	ReasonPublishFailed = "PublishFailed"
	// ReasonProtocolNotPublished (Warning): a port's protocol (SCTP) is not published
	// on the host.
	ReasonProtocolNotPublished = "ProtocolNotPublished"
)

// dialTimeout bounds one connection attempt to a backend.
const dialTimeout = 3 * time.Second

// Config is what New needs.
type Config struct {
	// Client reads Services, EndpointSlices and Nodes, and writes Events.
	Client kubernetes.Interface
	// Namespace is the network namespace connections into the cluster are made from
	// (the underlay); required unless Dial is set.
	Namespace string
	// Dial connects inside the cluster network; nil dials from Namespace.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Host opens the host's sockets; nil means a Host of its own with net.Listen and
	// net.ListenPacket. `tranche up` shares it with the servicelb controller, which
	// then hands out no address another program holds.
	Host *Host
	// NodePortAddress is where node ports are published; the zero value means
	// 127.0.0.1.
	NodePortAddress netip.Addr
	// Publishable says which load-balancer addresses to listen on (the servicelb
	// pool's); nil means any loopback address.
	Publishable func(netip.Addr) bool
	// Recorder receives Events on Services; nil means none.
	Recorder record.EventRecorder
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// RetryInterval is how often listeners that failed to open are tried again; 0
	// means 5 seconds.
	RetryInterval time.Duration
	// UDPIdleTimeout ends a UDP flow without traffic; 0 means 30 seconds (the
	// kernel's conntrack timeout for unreplied UDP).
	UDPIdleTimeout time.Duration
}

// Publisher holds the host's listeners. Create it with New, run it with Run.
type Publisher struct {
	cfg      Config
	log      *slog.Logger
	factory  informers.SharedInformerFactory
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	nodes    corelisters.NodeLister
	synced   []cache.InformerSynced
	kick     chan struct{}

	// Only Run's goroutine touches these.
	live   map[Listener]*live
	failed map[Listener]string // the error last reported for a listener that is not open
	lost   map[Conflict]bool   // conflicts already reported
	told   map[Skipped]bool    // unpublished ports already reported

	// closing counts unpublished listeners whose connections are still ending.
	closing sync.WaitGroup
}

// New builds a publisher and registers its informers' handlers. It panics when
// Client is missing, or when neither Namespace nor Dial is set (wiring mistakes).
func New(cfg Config) *Publisher {
	if cfg.Client == nil || (cfg.Namespace == "" && cfg.Dial == nil) {
		panic("publisher.New: Client and one of Namespace or Dial are required")
	}
	if cfg.Dial == nil {
		ns := cfg.Namespace
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			timeout := dialTimeout
			if d, ok := ctx.Deadline(); ok {
				timeout = time.Until(d)
			}
			return netns.Dial(ns, network, addr, timeout)
		}
	}
	if cfg.Host == nil {
		cfg.Host = NewHost(nil, nil)
	}
	if !cfg.NodePortAddress.IsValid() {
		cfg.NodePortAddress = netip.MustParseAddr("127.0.0.1")
	}
	if cfg.RetryInterval <= 0 {
		cfg.RetryInterval = 5 * time.Second
	}
	if cfg.UDPIdleTimeout <= 0 {
		cfg.UDPIdleTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factory := informers.NewSharedInformerFactory(cfg.Client, 0)
	p := &Publisher{
		cfg:      cfg,
		log:      log,
		factory:  factory,
		services: factory.Core().V1().Services().Lister(),
		slices:   factory.Discovery().V1().EndpointSlices().Lister(),
		nodes:    factory.Core().V1().Nodes().Lister(),
		kick:     make(chan struct{}, 1),
		live:     map[Listener]*live{},
		failed:   map[Listener]string{},
		lost:     map[Conflict]bool{},
		told:     map[Skipped]bool{},
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.wake() },
		UpdateFunc: func(any, any) { p.wake() },
		DeleteFunc: func(any) { p.wake() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().Services().Informer(),
		factory.Discovery().V1().EndpointSlices().Informer(),
		factory.Core().V1().Nodes().Informer(),
	} {
		// Registration fails only on a stopped informer, which these are not.
		_, _ = inf.AddEventHandler(handler)
		p.synced = append(p.synced, inf.HasSynced)
	}
	return p
}

// wake asks Run for a sync; wakes while one is pending coalesce.
func (p *Publisher) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run follows the cluster and keeps the host's listeners in line until ctx ends; then
// it closes every listener and connection. It fails only when the caches never sync.
func (p *Publisher) Run(ctx context.Context) error {
	p.factory.Start(ctx.Done())
	defer p.factory.Shutdown()
	defer p.closeAll()
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("host publisher: caches did not sync")
	}
	p.log.Info("host publisher started", "nodePortAddress", p.cfg.NodePortAddress, "dialFrom", p.cfg.Namespace)
	retry := time.NewTimer(p.cfg.RetryInterval)
	defer retry.Stop()
	for {
		p.sync()
		if len(p.failed) > 0 {
			retry.Reset(p.cfg.RetryInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-retry.C:
		}
	}
}

// sync computes the desired listeners and makes the live ones match: it closes those
// no longer wanted, re-targets the others and opens the missing ones.
func (p *Publisher) sync() {
	svcs, err1 := p.services.List(labels.Everything())
	eps, err2 := p.slices.List(labels.Everything())
	nodes, err3 := p.nodes.List(labels.Everything())
	if err := errors.Join(err1, err2, err3); err != nil {
		p.log.Error("reading the caches", "err", err)
		return
	}
	want, conflicts := Desired(Input{Services: svcs, Slices: eps, Nodes: nodes,
		NodePortAddress: p.cfg.NodePortAddress, Publishable: p.cfg.Publishable})
	for l, lv := range p.live {
		if _, ok := want[l]; !ok {
			// Not waited for here: a dial in progress would hold up every other change.
			lv.close()
			p.closing.Add(1)
			go func() {
				defer p.closing.Done()
				lv.wait()
			}()
			delete(p.live, l)
			p.log.Info("unpublished", "listener", l, "service", lv.target.Load().Service.String())
		}
	}
	for l := range p.failed {
		if _, ok := want[l]; !ok {
			delete(p.failed, l)
		}
	}
	for _, l := range sortedListeners(want) {
		t := want[l]
		if lv, ok := p.live[l]; ok {
			lv.target.Store(&t)
			continue
		}
		lv, err := p.open(l, &t)
		if err != nil && l.Addr.Addr() != p.cfg.NodePortAddress && errors.Is(err, syscall.EADDRINUSE) {
			// The controller checked the address before assigning it, but another
			// program (another local cluster) took it since: the Service moves.
			p.cfg.Host.lost()
		}
		if err != nil {
			msg := fmt.Sprintf("Cannot listen on %s on the host: %v", l, errors.Unwrap(err))
			if p.failed[l] != msg {
				p.log.Warn("cannot publish", "listener", l, "service", t.Service.String(), "err", err)
				p.event(t.Service, t.UID, v1.EventTypeWarning, ReasonPublishFailed, msg)
			}
			p.failed[l] = msg
			continue
		}
		delete(p.failed, l)
		p.live[l] = lv
		p.log.Info("published", "listener", l, "service", t.Service.String(), "to", t.describe())
		p.event(t.Service, t.UID, v1.EventTypeNormal, ReasonPublished,
			fmt.Sprintf("Listening on %s on the host, forwarding to %s", l, t.describe()))
	}
	current := map[Conflict]bool{}
	for _, c := range conflicts {
		current[c] = true
		if !p.lost[c] {
			p.log.Warn("listener wanted by two services", "listener", c.Listener, "holder", c.Winner.String(), "service", c.Loser.String())
			p.event(c.Loser, c.LoserUID, v1.EventTypeWarning, ReasonPublishFailed,
				fmt.Sprintf("Cannot listen on %s on the host: Service %s has it", c.Listener, c.Winner))
		}
	}
	p.lost = current
	skipped := map[Skipped]bool{}
	for _, sk := range Unpublished(svcs) {
		skipped[sk] = true
		if !p.told[sk] {
			p.log.Warn("port not published", "service", sk.Service.String(), "port", sk.Port, "protocol", sk.Protocol)
			p.event(sk.Service, sk.UID, v1.EventTypeWarning, ReasonProtocolNotPublished,
				fmt.Sprintf("Port %s (%s/%d) is not published on the host: the host publisher forwards TCP and UDP only; %s reaches the Service from inside the cluster network",
					sk.Port, sk.Protocol, sk.Number, sk.Protocol))
		}
	}
	p.told = skipped
}

// open opens the host socket of l and starts serving it.
func (p *Publisher) open(l Listener, t *Target) (*live, error) {
	lv := &live{listener: l, dial: p.cfg.Dial, log: p.log, idle: p.cfg.UDPIdleTimeout, host: p.cfg.Host}
	lv.target.Store(t)
	var err error
	lv.ln, lv.pc, err = p.cfg.Host.open(l)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", l, err)
	}
	lv.start()
	return lv, nil
}

// closeAll closes every listener and waits for their connections to end (when Run
// ends).
func (p *Publisher) closeAll() {
	for l, lv := range p.live {
		lv.close()
		lv.wait()
		delete(p.live, l)
	}
	p.closing.Wait()
}

// event records an Event on a Service.
func (p *Publisher) event(svc types.NamespacedName, uid types.UID, typ, reason, msg string) {
	if p.cfg.Recorder == nil {
		return
	}
	ref := &v1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: uid}
	p.cfg.Recorder.Event(ref, typ, reason, msg)
}

func sortedListeners(m map[Listener]Target) []Listener {
	out := make([]Listener, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Listener) int {
		return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Protocol, b.Protocol))
	})
	return out
}
