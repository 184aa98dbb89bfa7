package netpol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/tombstone"
)

// RunnerConfig is what a node's policy enforcement runs with.
type RunnerConfig struct {
	// NodeName picks the pods enforced here (spec.nodeName).
	NodeName string
	// NodeIP, ClusterCIDR and ServiceCIDR describe the node's network; they are logged
	// at start so that a table can be read against them (the rules need none of them:
	// they match pod addresses and policy blocks only).
	NodeIP                   netip.Addr
	ClusterCIDR, ServiceCIDR netip.Prefix
	// Client watches NetworkPolicies, pods and namespaces.
	Client kubernetes.Interface
	// Logger receives the logs (nil: discarded).
	Logger *slog.Logger
	// Metrics receives the tranche_networkpolicy_* metrics (nil: a new registry); the
	// agent passes the proxy's, which its metrics listener serves.
	Metrics *prometheus.Registry
	// NFT writes the table in the node's network namespace: the agent passes the
	// kernel's (knftables.New in the namespace it runs in), tests a fake. Required:
	// there is no default, so that nothing writes into the namespace a caller happens
	// to run in (a unit test's is the host's).
	NFT knftables.Interface
	// LoadFullSyncs, when set, writes full syncs as one nested nft script
	// (Syncer.LoadFullSyncsWith; the agent passes LoadWithNFT, beside a real NFT).
	LoadFullSyncs TextLoader
	// MinSyncPeriod is the least time between two syncs (0: DefaultMinSyncPeriod);
	// FullSyncPeriod the most between two full syncs (0: an hour); RetryPeriod the
	// wait before a full sync after a failure (0: a second).
	MinSyncPeriod, FullSyncPeriod, RetryPeriod time.Duration
}

// DefaultMinSyncPeriod batches the events of a burst (a Deployment's pods, a policy
// applied with its namespace) into one transaction without delaying a lone change
// noticeably.
const DefaultMinSyncPeriod = 100 * time.Millisecond

// Runner enforces the NetworkPolicies of one node: informers on policies, pods and
// namespaces record what changed, and a rate-limited loop compiles and syncs.
type Runner struct {
	cfg    RunnerConfig
	log    *slog.Logger
	syncer *Syncer
	track  *tracker
	// problems are the compile problems of the last sync (loop only).
	problems map[string]bool
	// inc is the model, kept up to date with the changes (loop only; nil: compiled
	// again from the listers at the next sync).
	inc *Incremental
}

// NewRunner checks that nft can be driven here and prepares the runner; Run starts it.
func NewRunner(cfg RunnerConfig) (*Runner, error) {
	if cfg.Client == nil {
		return nil, errors.New("netpol: no API client")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("netpol: no node name")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = prometheus.NewRegistry()
	}
	if cfg.MinSyncPeriod <= 0 {
		cfg.MinSyncPeriod = DefaultMinSyncPeriod
	}
	if cfg.FullSyncPeriod <= 0 {
		cfg.FullSyncPeriod = time.Hour
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = time.Second
	}
	if cfg.NFT == nil {
		return nil, fmt.Errorf("netpol: node %q: no nftables interface to write table %s with", cfg.NodeName, TableName)
	}
	r := &Runner{cfg: cfg, log: log, track: newTracker()}
	r.syncer = NewSyncer(cfg.NFT, log, cfg.Metrics)
	if cfg.LoadFullSyncs != nil {
		r.syncer.LoadFullSyncsWith(cfg.LoadFullSyncs)
	}
	return r, nil
}

// Run watches the API and keeps the table in sync until ctx ends; the table stays
// when it ends, so that a restarting agent leaves its pods protected. The first sync
// waits for the informers' initial lists and replaces any earlier run's table whole.
func (r *Runner) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(r.cfg.Client, 0)
	polInf := factory.Networking().V1().NetworkPolicies()
	nsInf := factory.Core().V1().Namespaces()
	// Host network pods never take part (their address is their node's); a node may
	// list the others (the node authorizer allows exactly this selector).
	podFactory := informers.NewSharedInformerFactoryWithOptions(r.cfg.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.hostNetwork", "false").String()
	}))
	podInf := podFactory.Core().V1().Pods()
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{polInf.Informer(), eventHandler(r.track.policy)},
		{podInf.Informer(), eventHandler(r.track.pod)},
		{nsInf.Informer(), eventHandler(r.track.namespace)},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return fmt.Errorf("netpol: node %q: %w", r.cfg.NodeName, err)
		}
	}
	factory.Start(ctx.Done())
	podFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer podFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), polInf.Informer().HasSynced, podInf.Informer().HasSynced, nsInf.Informer().HasSynced) {
		return ctx.Err()
	}
	r.log.Info("network policy enforcement running", "table", "ip "+TableName, "node", r.cfg.NodeName,
		"nodeIP", r.cfg.NodeIP.String(), "clusterCIDR", r.cfg.ClusterCIDR.String(), "serviceCIDR", r.cfg.ServiceCIDR.String())
	r.loop(ctx, polInf.Lister(), podInf.Lister(), nsInf.Lister())
	return nil
}

// eventHandler feeds one kind's events to record(old, cur), nil for a creation's old
// and a deletion's cur.
func eventHandler[T any](record func(old, cur *T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if o, ok := obj.(*T); ok {
				record(nil, o)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*T)
			c, ok2 := cur.(*T)
			if ok1 && ok2 {
				record(o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if o := tombstone.As[*T](obj); o != nil {
				record(o, nil)
			}
		},
	}
}

// loop syncs whenever changes arrive, at most once per MinSyncPeriod, fully every
// FullSyncPeriod, and fully again after RetryPeriod when a sync fails.
func (r *Runner) loop(ctx context.Context, pols netlisters.NetworkPolicyLister, pods corelisters.PodLister, nss corelisters.NamespaceLister) {
	full := time.NewTimer(r.cfg.FullSyncPeriod)
	defer full.Stop()
	retry := time.NewTimer(0) // first sync at once
	defer retry.Stop()
	needFull := true
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.track.wake:
		case <-retry.C:
		case <-full.C:
			needFull = true
		}
		if wait := r.cfg.MinSyncPeriod - time.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		changed, seen := r.track.drain()
		err := r.syncOnce(ctx, pols, pods, nss, needFull, changed)
		if err != nil {
			r.log.Error("syncing network policy rules failed, retrying with a full sync", "node", r.cfg.NodeName, "err", err)
			r.track.requeue(changed, seen)
			retry.Reset(r.cfg.RetryPeriod)
			continue
		}
		done := time.Now()
		for _, t := range seen {
			r.syncer.metrics.programmingDuration.Observe(done.Sub(t).Seconds())
		}
		if needFull {
			needFull = false
			full.Reset(r.cfg.FullSyncPeriod)
		}
	}
}

// syncOnce compiles the changes into the model (everything from the listers when
// full or after a failure) and syncs it.
func (r *Runner) syncOnce(ctx context.Context, pols netlisters.NetworkPolicyLister, pods corelisters.PodLister, nss corelisters.NamespaceLister, full bool, ch changes) error {
	if full || r.inc == nil {
		var snap Snapshot
		var err error
		snap.NodeName = r.cfg.NodeName
		if snap.Policies, err = pols.List(labels.Everything()); err != nil {
			return err
		}
		if snap.Pods, err = pods.List(labels.Everything()); err != nil {
			return err
		}
		if snap.Namespaces, err = nss.List(labels.Everything()); err != nil {
			return err
		}
		r.inc = NewIncremental(snap)
	} else {
		for _, name := range ch.namespaces {
			ns, err := nss.Get(name)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			r.inc.SetNamespace(name, ns)
		}
		for _, key := range ch.pods {
			namespace, name, _ := strings.Cut(key, "/")
			p, err := pods.Pods(namespace).Get(name)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			r.inc.SetPod(key, p)
		}
		for _, key := range ch.policies {
			namespace, name, _ := strings.Cut(key, "/")
			np, err := pols.NetworkPolicies(namespace).Get(name)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			r.inc.SetPolicy(key, np)
		}
	}
	m := r.inc.Model()
	// Each problem is logged when it appears, not at every sync.
	problems := map[string]bool{}
	for _, p := range m.Problems {
		problems[p] = true
		if !r.problems[p] {
			r.log.Warn("a NetworkPolicy rule cannot be enforced: it allows nothing", "problem", p)
		}
	}
	r.problems = problems
	if err := r.syncer.Sync(ctx, m, full, ch.policies); err != nil {
		r.inc = nil
		return err
	}
	return nil
}

// tracker records, per event, whether anything the rules depend on changed: for a
// pod its address, labels, node, host networking, whether it terminated, and its
// named ports; for a namespace its labels; for a policy its spec. A change wakes the
// loop; its arrival time is what the programming duration is measured from (the API's
// own timestamps have whole seconds only).
type tracker struct {
	wake chan struct{}

	mu   sync.Mutex
	keys [3]map[string]bool // policies, pods ("ns/name"), namespaces
	seen []time.Time
}

// changes are the keys of the objects that changed since the last sync, sorted.
type changes struct {
	policies, pods, namespaces []string
}

// The kinds a tracker records.
const (
	policyKind = iota
	podKind
	namespaceKind
)

func newTracker() *tracker {
	return &tracker{wake: make(chan struct{}, 1), keys: [3]map[string]bool{{}, {}, {}}}
}

func (t *tracker) note(kind int, key string) {
	t.mu.Lock()
	t.keys[kind][key] = true
	t.seen = append(t.seen, time.Now())
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *tracker) policy(old, cur *networkingv1.NetworkPolicy) {
	if old != nil && cur != nil && apiequality.Semantic.DeepEqual(old.Spec, cur.Spec) {
		return
	}
	o := cur
	if o == nil {
		o = old
	}
	t.note(policyKind, o.Namespace+"/"+o.Name)
}

func (t *tracker) pod(old, cur *v1.Pod) {
	if old != nil && cur != nil && podView(old) == podView(cur) {
		return
	}
	o := cur
	if o == nil {
		o = old
	}
	t.note(podKind, o.Namespace+"/"+o.Name)
}

func (t *tracker) namespace(old, cur *v1.Namespace) {
	if old != nil && cur != nil && maps.Equal(old.Labels, cur.Labels) {
		return
	}
	o := cur
	if o == nil {
		o = old
	}
	t.note(namespaceKind, o.Name)
}

// podView is what of a pod the rules depend on, comparable.
func podView(p *v1.Pod) string {
	ip, usable := usablePod(p)
	s := fmt.Sprintf("%v|%s|%s|", usable, ip, p.Spec.NodeName)
	for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
		s += k + "=" + p.Labels[k] + ","
	}
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				s += fmt.Sprintf("|%s/%s/%d", cp.Name, cp.Protocol, cp.ContainerPort)
			}
		}
	}
	return s
}

// drain returns the changes and their arrival times since the last drain, and
// forgets them.
func (t *tracker) drain() (changes, []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ch := changes{slices.Sorted(maps.Keys(t.keys[policyKind])), slices.Sorted(maps.Keys(t.keys[podKind])), slices.Sorted(maps.Keys(t.keys[namespaceKind]))}
	for _, m := range t.keys {
		clear(m)
	}
	seen := t.seen
	t.seen = nil
	return ch, seen
}

// requeue puts back what a failed sync drained, so that the retry counts them.
func (t *tracker) requeue(ch changes, seen []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for kind, keys := range [][]string{ch.policies, ch.pods, ch.namespaces} {
		for _, k := range keys {
			t.keys[kind][k] = true
		}
	}
	t.seen = append(seen, t.seen...)
}
