// Package servicelb gives LoadBalancer Services their external address, as a cloud's
// service controller would: each Service of type LoadBalancer with no
// spec.loadBalancerClass, or with LoadBalancerClass, gets an address from a pool
// (127.0.10.0/24 on a local cluster) written to status.loadBalancer.ingress, so
// `kubectl get svc` shows EXTERNAL-IP <pending> and then the address. The address is
// free again when the Service is deleted or stops being a LoadBalancer. Several
// Services share an address when the pool has no unused one left (or when
// spec.loadBalancerIP asks for a used one) and their ports do not collide; a collision
// leaves the later Service pending, with a Warning Event saying which Service holds
// the port.
//
// Traffic to the address is not this package's business: on a local cluster the host
// publisher listens there, and the pool is checked against the host (Pool.OnHost) so
// that no Service gets an address whose port another program holds, such as another
// local cluster drawing from the same default pool. The ingress points carry ipMode Proxy, which is what the
// publisher does: it forwards connections to a node's address and the Service's
// nodePort, so nodes need no rule for the address itself.
//
// On machines, where no pool is routed, the pool NodesPool gives each Service the
// Ready nodes' own addresses instead, as k3s's ServiceLB does (ComputeNodes); each
// node's proxy takes the traffic arriving there (ipMode VIP).
//
// The controller computes the whole assignment at once (Compute, pure) from the
// Services in its cache and writes the statuses that differ (one apply step).
package servicelb

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/controller/worker"
	"github.com/tranche/tranche/internal/tombstone"
)

// Event reasons on Services.
const (
	// ReasonAssigned (Normal) says which address a Service got.
	ReasonAssigned = "AddressAssigned"
	// ReasonPending (Warning) says why a Service has no address.
	ReasonPending = "AddressPending"
)

// syncKey is the only key of the queue: every sync computes all Services at once,
// because one Service's address depends on the others'.
const syncKey = "pool"

// Config is what New needs.
type Config struct {
	// Client writes Services' status.
	Client kubernetes.Interface
	// Informers provides Services; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// Pool is where addresses come from. An empty pool leaves every Service pending.
	Pool Pool
	// Recorder receives the Events on Services; nil means none.
	Recorder record.EventRecorder
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Controller assigns load-balancer addresses. Create it with New, start it with Run.
type Controller struct {
	client   kubernetes.Interface
	pool     Pool
	recorder record.EventRecorder
	log      *slog.Logger
	services corelisters.ServiceLister
	// nodes lists the Nodes whose addresses NodesPool hands out; nil for other pools.
	nodes  corelisters.NodeLister
	synced []cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]

	// prev is the last plan computed; only the single worker touches it.
	prev Plan
	// written remembers the last status written per Service and the resourceVersion
	// it was written over, so that a sync running before the cache has caught up
	// with that write does not write it again (the API would answer Conflict).
	// Only the single worker touches it.
	written map[types.NamespacedName]pendingWrite
}

// pendingWrite is a status write not yet necessarily seen in the cache.
type pendingWrite struct {
	over    string
	ingress []v1.LoadBalancerIngress
}

// New builds the controller and registers its handlers on cfg.Informers. It panics
// when Client or Informers is missing (a wiring mistake found at start-up).
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("servicelb.New: Client and Informers are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := cfg.Informers.Core().V1().Services()
	c := &Controller{
		client:   cfg.Client,
		pool:     cfg.Pool,
		recorder: cfg.Recorder,
		log:      log,
		services: inf.Lister(),
		synced:   []cache.InformerSynced{inf.Informer().HasSynced},
		queue:    worker.NewQueue("servicelb", nil),
		written:  map[types.NamespacedName]pendingWrite{},
	}
	// Registration fails only on a stopped informer, which this one is not.
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueue(nil, obj) },
		UpdateFunc: c.enqueue,
		DeleteFunc: func(obj any) {
			if svc := tombstone.As[*v1.Service](obj); svc != nil {
				c.enqueue(nil, svc)
			}
		},
	})
	if cfg.Pool.Nodes() {
		nodes := cfg.Informers.Core().V1().Nodes()
		c.nodes = nodes.Lister()
		c.synced = append(c.synced, nodes.Informer().HasSynced)
		_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { c.queue.Add(syncKey) },
			UpdateFunc: func(old, cur any) {
				o, ok1 := old.(*v1.Node)
				n, ok2 := cur.(*v1.Node)
				if !ok1 || !ok2 || o.Labels[LabelEnableLB] != n.Labels[LabelEnableLB] ||
					!slices.Equal(nodeAddrs([]*v1.Node{o}), nodeAddrs([]*v1.Node{n})) {
					c.queue.Add(syncKey)
				}
			},
			DeleteFunc: func(any) { c.queue.Add(syncKey) },
		})
	}
	return c
}

// enqueue wakes the worker when a change may matter: only LoadBalancer Services
// (before or after the change) take part in the plan.
func (c *Controller) enqueue(old, obj any) {
	relevant := func(o any) bool {
		s, ok := o.(*v1.Service)
		return ok && (s.Spec.Type == v1.ServiceTypeLoadBalancer || len(s.Status.LoadBalancer.Ingress) > 0)
	}
	if relevant(old) || relevant(obj) {
		c.queue.Add(syncKey)
	}
}

// Run waits for the Service cache, then keeps addresses assigned until ctx ends;
// it returns once the sync under way returned.
func (c *Controller) Run(ctx context.Context) {
	c.log.Info("load-balancer pool", "pool", c.pool.String(), "class", LoadBalancerClass)
	c.queue.Add(syncKey)
	var wg sync.WaitGroup
	defer wg.Wait()
	if c.pool.host != nil {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c.pool.host.Changed():
					c.queue.Add(syncKey)
				}
			}
		})
	}
	worker.Loop{
		Kind:       "load-balancer pool",
		Queue:      c.queue,
		Synced:     c.synced,
		Sync:       func(ctx context.Context, _ string) error { return c.sync(ctx) },
		MaxRetries: worker.DefaultMaxRetries,
		Logger:     c.log,
	}.Run(ctx, 1)
}

// HasSynced reports whether the Service cache is filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

// sync computes the plan over every Service in the cache and writes the statuses that
// differ from it; Events tell what changed since the previous plan.
func (c *Controller) sync(ctx context.Context) error {
	svcs, err := c.services.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing services: %w", err)
	}
	var plan Plan
	if c.nodes != nil {
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("listing nodes: %w", err)
		}
		plan = ComputeNodes(svcs, nodes, c.prev)
	} else {
		plan = Compute(svcs, c.pool, c.prev)
	}
	var errs []error
	for _, svc := range sortedServices(svcs) {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		a, ok := plan[key]
		if !ok {
			delete(c.written, key)
			continue
		}
		if err := c.apply(ctx, svc, a); err != nil {
			errs = append(errs, err)
		}
	}
	for key := range c.written {
		if _, ok := plan[key]; !ok {
			delete(c.written, key)
		}
	}
	c.report(svcs, plan)
	c.prev = plan
	if len(errs) > 0 {
		return fmt.Errorf("%d status writes failed, first: %w", len(errs), errs[0])
	}
	return nil
}

// apply writes the status.loadBalancer a makes for svc, when it differs.
func (c *Controller) apply(ctx context.Context, svc *v1.Service, a Assignment) error {
	want := Ingress(a)
	key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	if sameIngress(svc.Status.LoadBalancer.Ingress, want) {
		return nil
	}
	if w, ok := c.written[key]; ok && w.over == svc.ResourceVersion && sameIngress(w.ingress, want) {
		return nil // written already; the cache has not seen it yet
	}
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = want
	_, err := c.client.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing the load-balancer status of service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	c.written[key] = pendingWrite{over: svc.ResourceVersion, ingress: want}
	if len(a.Nodes) > 0 {
		c.log.Info("assigned the nodes' addresses", "service", svc.Namespace+"/"+svc.Name, "ips", a.Nodes)
		if c.recorder != nil {
			c.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned the nodes' addresses %s", addrList(a.Nodes))
		}
	} else if a.IP.IsValid() {
		c.log.Info("assigned load-balancer address", "service", svc.Namespace+"/"+svc.Name, "ip", a.IP, "left", a.Left)
		if c.recorder != nil {
			if a.Left != "" {
				c.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned %s from the load-balancer pool %s; left the previous address: %s", a.IP, c.pool, a.Left)
			} else {
				c.recorder.Eventf(svc, v1.EventTypeNormal, ReasonAssigned, "Assigned %s from the load-balancer pool %s", a.IP, c.pool)
			}
		}
	} else {
		c.log.Info("load-balancer address pending", "service", svc.Namespace+"/"+svc.Name, "reason", a.Pending)
	}
	return nil
}

// report records a Warning Event for every pending Service whose reason changed since
// the previous plan, so a collision is told once, not at every sync. (Assignments are
// told by apply, when the status is written: a restart announces nothing new.)
func (c *Controller) report(svcs []*v1.Service, plan Plan) {
	if c.recorder == nil {
		return
	}
	for _, svc := range svcs {
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		a, ok := plan[key]
		if !ok || a.IP.IsValid() {
			continue
		}
		if p, seen := c.prev[key]; seen && p.Pending == a.Pending {
			continue
		}
		c.recorder.Eventf(svc, v1.EventTypeWarning, ReasonPending, "No load-balancer address: %s", a.Pending)
	}
}

// Ingress is the status.loadBalancer.ingress an assignment makes: the address with
// ipMode Proxy (the host publisher forwards), the nodes' addresses with ipMode VIP (each
// node's proxy takes the traffic itself), or nothing while pending.
func Ingress(a Assignment) []v1.LoadBalancerIngress {
	if len(a.Nodes) > 0 {
		vip := v1.LoadBalancerIPModeVIP
		out := make([]v1.LoadBalancerIngress, len(a.Nodes))
		for i, ip := range a.Nodes {
			out[i] = v1.LoadBalancerIngress{IP: ip.String(), IPMode: &vip}
		}
		return out
	}
	if !a.IP.IsValid() {
		return nil
	}
	mode := v1.LoadBalancerIPModeProxy
	return []v1.LoadBalancerIngress{{IP: a.IP.String(), IPMode: &mode}}
}

func sameIngress(a, b []v1.LoadBalancerIngress) bool {
	return slices.EqualFunc(a, b, func(x, y v1.LoadBalancerIngress) bool {
		return x.IP == y.IP && x.Hostname == y.Hostname && len(x.Ports) == 0 && len(y.Ports) == 0 &&
			(x.IPMode == nil) == (y.IPMode == nil) && (x.IPMode == nil || *x.IPMode == *y.IPMode)
	})
}

// sortedServices orders services by namespace/name, so writes happen in a stable order.
func sortedServices(svcs []*v1.Service) []*v1.Service {
	out := slices.Clone(svcs)
	slices.SortFunc(out, func(a, b *v1.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// addrList writes addresses comma-separated.
func addrList(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}
