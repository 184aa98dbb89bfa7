package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/tranche/tranche/internal/resync"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/knftables"
)

// Config is what an overlay runs with.
type Config struct {
	// Backend is BackendVXLAN or BackendHostGW.
	Backend string
	// NodeName, PublicIP and PodCIDR are this node's name, underlay address and pod subnet.
	NodeName string
	PublicIP netip.Addr
	PodCIDR  netip.Prefix
	// Dataplane is the node's namespace.
	Dataplane Dataplane
	// Client publishes this node's annotations (a node identity may patch its own Node);
	// Watch, which may be Client when that may read every Node, lists and watches the
	// Nodes (a node identity may read only its own: Kubernetes' node authorizer).
	Client, Watch kubernetes.Interface
	Logger        *slog.Logger
	// Resync is how often a full sync runs without any Node event (a minute when 0),
	// repairing entries someone else removed.
	Resync time.Duration
	// ClusterCIDR is the cluster's pod network; when valid, pods' traffic leaving it
	// is masqueraded (MasqTable), as flannel's --ip-masq.
	ClusterCIDR netip.Prefix
	// NFT writes MasqTable (the masquerade, and with vxlan the VXLAN packets' exemption
	// from connection tracking) in the node's network namespace: the agent passes the
	// kernel's (knftables.New, in the namespace it runs in), tests a fake. Required
	// whenever there is a table to write; there is no default, so that nothing writes
	// into the namespace a caller happens to run in (a test's: the host's).
	NFT knftables.Interface
}

// Overlay keeps a node's routes to the other nodes' pod subnets.
type Overlay struct {
	cfg   Config
	local Local
	log   *slog.Logger
}

// Prepare checks cfg, finds the uplink holding cfg.PublicIP and, for vxlan, creates (or
// repairs) the vxlan device; for host-gw it removes a vxlan device left by an earlier run
// with vxlan, and with it that run's routes. PodMTU then is the MTU pods must use.
func Prepare(cfg Config) (*Overlay, error) {
	if cfg.Backend != BackendVXLAN && cfg.Backend != BackendHostGW {
		return nil, fmt.Errorf("overlay backend %q: want %s or %s", cfg.Backend, BackendVXLAN, BackendHostGW)
	}
	if !cfg.PublicIP.Is4() || !cfg.PodCIDR.Addr().Is4() {
		return nil, fmt.Errorf("overlay of node %q: public IP %s and pod CIDR %s must be IPv4", cfg.NodeName, cfg.PublicIP, cfg.PodCIDR)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resync == 0 {
		cfg.Resync = time.Minute
	}
	o := &Overlay{cfg: cfg, log: cfg.Logger.With("component", "overlay", "backend", cfg.Backend)}
	o.local = Local{Name: cfg.NodeName, PodCIDR: cfg.PodCIDR.Masked()}
	var err error
	if o.local.Uplink, o.local.UplinkPrefix, o.local.UplinkMTU, err = cfg.Dataplane.Uplink(cfg.PublicIP); err != nil {
		return nil, fmt.Errorf("overlay of node %q: %w", cfg.NodeName, err)
	}
	if err := o.ensureDevice(); err != nil {
		return nil, err
	}
	var vxlanLocal netip.Addr
	if cfg.Backend == BackendVXLAN {
		vxlanLocal = cfg.PublicIP
	}
	if cfg.ClusterCIDR.IsValid() || vxlanLocal.IsValid() {
		if cfg.NFT == nil {
			return nil, fmt.Errorf("overlay of node %q: no nftables interface to write table %s with", cfg.NodeName, MasqTable)
		}
		if err := ensureTable(context.Background(), cfg.NFT, cfg.ClusterCIDR, vxlanLocal); err != nil {
			return nil, fmt.Errorf("overlay of node %q: %w", cfg.NodeName, err)
		}
	}
	return o, nil
}

func (o *Overlay) ensureDevice() error {
	if o.cfg.Backend == BackendHostGW {
		return o.cfg.Dataplane.DeleteVXLAN()
	}
	mac, err := o.cfg.Dataplane.EnsureVXLAN(o.cfg.PublicIP, o.local.Uplink, o.PodMTU(), netip.PrefixFrom(o.local.PodCIDR.Addr(), 32))
	if err != nil {
		return fmt.Errorf("overlay of node %q: %w", o.cfg.NodeName, err)
	}
	o.local.VtepMAC = mac
	return nil
}

// PodMTU is the MTU pods get: the uplink's, less VXLANOverhead with vxlan.
func (o *Overlay) PodMTU() int {
	if o.cfg.Backend == BackendVXLAN {
		return o.local.UplinkMTU - VXLANOverhead
	}
	return o.local.UplinkMTU
}

// Sync makes the kernel match nodes (every Node of the cluster, this one included): it
// repairs the vxlan device, then writes only the differences between the entries it owns
// and the desired ones, so a sync with nothing changed writes nothing.
func (o *Overlay) Sync(nodes []*v1.Node) error {
	if err := o.ensureDevice(); err != nil {
		return err
	}
	var peers []Peer
	for _, n := range nodes {
		if n.Name == o.cfg.NodeName {
			continue
		}
		p, err := PeerFromNode(n)
		if err != nil {
			o.log.Debug("node not routed yet", "err", err)
			continue
		}
		peers = append(peers, p)
	}
	want, skipped := Desired(o.cfg.Backend, o.local, peers)
	for _, s := range skipped {
		o.log.Debug("node not routed", "reason", s)
	}
	have, err := o.cfg.Dataplane.State()
	if err != nil {
		return err
	}
	c := Diff(have, want)
	if c.Empty() {
		return nil
	}
	o.log.Info("overlay sync", "routes+", len(c.AddRoutes), "routes-", len(c.DelRoutes), "fdb+", len(c.AddFDB), "fdb-", len(c.DelFDB))
	return o.cfg.Dataplane.Apply(c)
}

// Annotations are the annotations this node publishes.
func (o *Overlay) Annotations() map[string]string {
	return Annotations(o.cfg.Backend, o.cfg.PublicIP, o.local.VtepMAC)
}

// Run publishes this node's annotations and syncs on every Node change and every Resync
// until ctx ends. A failed sync is retried with a growing delay (up to Resync).
func (o *Overlay) Run(ctx context.Context) error {
	watch := o.cfg.Watch
	if watch == nil {
		watch = o.cfg.Client
	}
	f := informers.NewSharedInformerFactory(watch, 0)
	inf := f.Core().V1().Nodes()
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke,
		UpdateFunc: func(old, cur any) {
			if relevant(old.(*v1.Node), cur.(*v1.Node)) {
				poke(cur)
			}
		},
	}); err != nil {
		return err
	}
	if lw, ok := o.cfg.Dataplane.(LinkWatcher); ok {
		// The kernel drops routes through a link that goes down (host-gw's through
		// the uplink): a link that returns is synced at once.
		ups, err := lw.LinkUps(ctx.Done())
		if err != nil {
			return err
		}
		go func() {
			for name := range ups {
				if name == o.local.Uplink {
					poke(nil)
				}
			}
		}()
	}
	lister := inf.Lister()
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}
	o.log.Info("overlay running", "uplink", o.local.Uplink, "podMTU", o.PodMTU(), "vtepMAC", o.local.VtepMAC.String())
	resync.Loop(ctx, wake, o.cfg.Resync, func() error {
		nodes, err := lister.List(labels.Everything())
		if err == nil {
			err = o.publish(ctx, nodes)
		}
		if err == nil {
			err = o.Sync(nodes)
		}
		return err
	}, func(err error, retry time.Duration) { o.log.Warn("overlay sync failed", "err", err, "retry", retry) })
	return nil
}

// publish patches this node's annotations when they differ (a re-registered Node has
// none).
func (o *Overlay) publish(ctx context.Context, nodes []*v1.Node) error {
	want := o.Annotations()
	for _, n := range nodes {
		if n.Name != o.cfg.NodeName {
			continue
		}
		if maps.Equal(want, pick(n.Annotations, slices.Collect(maps.Keys(want)))) {
			return nil
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
		if _, err := o.cfg.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("publishing the overlay annotations of node %q: %w", n.Name, err)
		}
		return nil
	}
	return nil // not registered yet: the Node's add event brings us back
}

func pick(m map[string]string, keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// relevant reports whether an update changes what the overlay reads from a Node (status
// heartbeats do not).
func relevant(old, cur *v1.Node) bool {
	if old.Spec.PodCIDR != cur.Spec.PodCIDR || !maps.Equal(old.Annotations, cur.Annotations) {
		return true
	}
	return !slices.Equal(old.Status.Addresses, cur.Status.Addresses)
}
