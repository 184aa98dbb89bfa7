package l2announce

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/tranche/tranche/internal/resync"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Config is what an Announcer runs with.
type Config struct {
	// NodeName is this node; LAN is its uplink's subnet.
	NodeName string
	LAN      netip.Prefix
	// Nodes reads every Node (the pod network's identity); Services reads Services and
	// EndpointSlices (the node's own).
	Nodes, Services kubernetes.Interface
	Dataplane       Dataplane
	Logger          *slog.Logger
	// Resync is how often a sync runs without any event; it keeps the held addresses
	// alive (AddressLifetime/3 when 0).
	Resync time.Duration
	// InContact, when set, says whether the node is still in contact with the API
	// server. While it is not, the node announces nothing: its caches may still say it
	// is chosen, but the cluster will soon take it for gone and choose another node,
	// which must not find this one answering ARP beside it (MetalLB's speakers learn
	// that from memberlist; here the node's own heartbeat is the signal).
	InContact func() bool
}

// Announcer keeps the addresses a node announces.
type Announcer struct {
	cfg Config
	log *slog.Logger
	// cands are the candidates of the last sync.
	cands string
	// cut is set while InContact says no.
	cut bool
}

// New returns an Announcer.
func New(cfg Config) *Announcer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync == 0 {
		cfg.Resync = AddressLifetime / 3
	}
	return &Announcer{cfg: cfg, log: cfg.Logger.With("component", "l2announce")}
}

// Sync takes the addresses of want not held yet, keeps (gives their whole lifetime
// again) the held ones in want and releases the others. When the candidates changed since the last sync (cands, the nodes that may announce),
// it also announces again the addresses it keeps: a node whose link came back is Ready
// again and chosen again, and neighbours that followed another node's gratuitous ARP
// meanwhile must come back to it.
func (a *Announcer) Sync(want map[netip.Addr]string, cands []string) error {
	key := strings.Join(cands, ",")
	again := key != a.cands
	a.cands = key
	held, err := a.cfg.Dataplane.Held()
	if err != nil {
		return err
	}
	has := map[netip.Addr]bool{}
	var firstErr error
	for _, ip := range held {
		has[ip] = true
		if _, ok := want[ip]; !ok {
			a.log.Info("releasing load-balancer address", "address", ip)
			if err := a.cfg.Dataplane.Release(ip); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	for ip, svc := range want {
		if has[ip] {
			if err := a.cfg.Dataplane.Keep(ip); err != nil && firstErr == nil {
				firstErr = err
			}
			if again {
				if err := a.cfg.Dataplane.Announce(ip); err != nil && firstErr == nil {
					firstErr = err
				}
			}
			continue
		}
		a.log.Info("announcing load-balancer address", "address", ip, "service", svc)
		if err := a.cfg.Dataplane.Take(ip); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Run syncs on every change of the Nodes, Services and EndpointSlices and every Resync
// until ctx ends, then releases every address it holds (another node takes them over
// once this one is no longer Ready).
func (a *Announcer) Run(ctx context.Context) error {
	nf := informers.NewSharedInformerFactory(a.cfg.Nodes, 0)
	sf := informers.NewSharedInformerFactory(a.cfg.Services, 0)
	nodes := nf.Core().V1().Nodes()
	svcs := sf.Core().V1().Services()
	slices := sf.Discovery().V1().EndpointSlices()
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }}
	for _, inf := range []cache.SharedIndexInformer{nodes.Informer(), svcs.Informer(), slices.Informer()} {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	nf.Start(ctx.Done())
	sf.Start(ctx.Done())
	defer nf.Shutdown()
	defer sf.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced, svcs.Informer().HasSynced, slices.Informer().HasSynced) {
		return ctx.Err()
	}
	defer func() {
		if err := a.Sync(nil, nil); err != nil {
			a.log.Warn("releasing load-balancer addresses", "err", err)
		}
	}()
	a.log.Info("announcing load-balancer addresses", "lan", a.cfg.LAN)
	resync.Loop(ctx, wake, a.cfg.Resync, func() error {
		ns, err := nodes.Lister().List(labels.Everything())
		var ss []*v1.Service
		if err == nil {
			ss, err = svcs.Lister().List(labels.Everything())
		}
		if err == nil {
			sl, lerr := slices.Lister().List(labels.Everything())
			err = lerr
			if err == nil {
				err = a.Sync(a.unlessCut(Desired(a.cfg.NodeName, a.cfg.LAN, ns, ss, sl)), Candidates(ns))
			}
		}
		return err
	}, func(err error, retry time.Duration) {
		a.log.Warn("announcing load-balancer addresses failed", "err", err, "retry", retry)
	})
	return nil
}

// unlessCut returns want, or nothing while the node is out of contact with the API
// server (Config.InContact); it logs the changes between the two.
func (a *Announcer) unlessCut(want map[netip.Addr]string) map[netip.Addr]string {
	if a.cfg.InContact == nil {
		return want
	}
	switch in := a.cfg.InContact(); {
	case !in && !a.cut:
		a.cut = true
		a.log.Warn("out of contact with the API server: releasing every load-balancer address, which another node takes over once this one is no longer Ready")
	case in && a.cut:
		a.cut = false
		a.log.Info("in contact with the API server again: announcing the load-balancer addresses this node is chosen for")
	}
	if a.cut {
		return nil
	}
	return want
}
