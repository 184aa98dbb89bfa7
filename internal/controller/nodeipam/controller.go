// Package nodeipam gives every Node a pod subnet of the cluster CIDR, as
// Kubernetes' node IPAM controller does with its range allocator: a node
// without spec.podCIDR gets the lowest free node-sized subnet written to
// spec.podCIDR and spec.podCIDRs, and the subnet is free again once the node
// is deleted. Subnets already on nodes are taken over at start, so a
// restarted controller never hands one out twice.
package nodeipam

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"

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

// DefaultClusterCIDR is the tranche pod network, used when Config leaves
// ClusterCIDR zero; with /24 node subnets, node i gets 10.244.i.0/24.
var DefaultClusterCIDR = netip.MustParsePrefix("10.244.0.0/16")

// Default node subnet sizes per family, as kube-controller-manager's
// --node-cidr-mask-size-ipv4 and -ipv6.
const (
	DefaultNodeMaskSizeIPv4 = 24
	DefaultNodeMaskSizeIPv6 = 64
)

// reasonCIDRNotAvailable is the event reason Kubernetes reports on a node
// when the cluster CIDR has no free subnet left for it.
const reasonCIDRNotAvailable = "CIDRNotAvailable"

// Config is what New needs.
type Config struct {
	// Client patches nodes' pod CIDRs.
	Client kubernetes.Interface
	// Informers provides Nodes; the caller starts it after New.
	Informers informers.SharedInformerFactory
	// ClusterCIDR is the range node subnets are cut from; the zero value
	// means DefaultClusterCIDR.
	ClusterCIDR netip.Prefix
	// NodeMaskSize is the prefix length of each node's subnet; 0 means
	// DefaultNodeMaskSizeIPv4 or DefaultNodeMaskSizeIPv6 by ClusterCIDR's
	// family.
	NodeMaskSize int
	// Recorder, when not nil, receives the CIDRNotAvailable event on a node
	// that cannot get a subnet.
	Recorder record.EventRecorder
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
}

// Controller assigns and frees node pod subnets. Create it with New and
// start it with Run.
type Controller struct {
	client   kubernetes.Interface
	recorder record.EventRecorder
	log      *slog.Logger
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]

	// set is touched only by the single worker (and by Run before it
	// starts), so it needs no lock.
	set *cidrSet
}

// New builds the controller and registers its handlers on cfg.Informers.
// It panics when Client or Informers is missing or when the cluster CIDR
// and mask size do not make a valid subnet division: all are wiring
// mistakes found at start-up.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("nodeipam.New: Client and Informers are required")
	}
	cluster := cfg.ClusterCIDR
	if !cluster.IsValid() {
		cluster = DefaultClusterCIDR
	}
	mask := cfg.NodeMaskSize
	if mask == 0 {
		mask = DefaultNodeMaskSizeIPv4
		if cluster.Addr().Is6() {
			mask = DefaultNodeMaskSizeIPv6
		}
	}
	set, err := newCIDRSet(cluster, mask)
	if err != nil {
		panic(fmt.Sprintf("nodeipam.New: %v", err))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := cfg.Informers.Core().V1().Nodes()
	c := &Controller{
		client:   cfg.Client,
		recorder: cfg.Recorder,
		log:      log,
		nodes:    inf.Lister(),
		synced:   inf.Informer().HasSynced,
		queue:    worker.NewQueue("nodeipam", nil),
		set:      set,
	}
	// Registration fails only on a stopped informer, which this one is not.
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	return c
}

// enqueue records a node to look at: any change may be a node that needs
// a subnet, one whose subnet was set elsewhere, or one that went away.
func (c *Controller) enqueue(obj any) {
	if n := tombstone.As[*v1.Node](obj); n != nil {
		c.queue.Add(n.Name)
	}
}

// Run waits for the node cache, takes over the subnets nodes already have,
// then assigns subnets until ctx ends; it returns once the sync under way
// returned.
func (c *Controller) Run(ctx context.Context) {
	worker.Loop{Kind: "node pod CIDR", Queue: c.queue, Synced: []cache.InformerSynced{c.synced}, Start: c.start, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Logger: c.log}.Run(ctx, 1)
}

// HasSynced reports whether the node cache is filled.
func (c *Controller) HasSynced() bool { return c.synced() }

// start takes over the subnets nodes already have before any node is synced.
func (c *Controller) start(context.Context) error {
	if err := c.occupyExisting(); err != nil {
		return fmt.Errorf("reading existing node subnets: %w", err)
	}
	c.log.Info("started", "clusterCIDR", c.set.cluster, "nodeMaskSize", c.set.mask)
	return nil
}

// occupyExisting records the subnets of every node in the cache, so that
// none is handed to another node.
func (c *Controller) occupyExisting() error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, n := range nodes {
		c.occupy(n)
	}
	return nil
}

// occupy records the subnets node has in its spec; it reports whether the
// spec names any. A node whose CIDR is unparsable or outside the cluster
// CIDR still counts as having one: the field is immutable once set.
func (c *Controller) occupy(node *v1.Node) bool {
	if node.Spec.PodCIDR == "" && len(node.Spec.PodCIDRs) == 0 {
		return false
	}
	cidrs := nodeCIDRs(node)
	if others := c.set.occupy(node.Name, cidrs); len(others) > 0 {
		c.log.Warn("node pod CIDR overlaps other nodes' subnets", "node", node.Name, "podCIDRs", node.Spec.PodCIDRs, "others", others)
	}
	return true
}

// sync brings one node's subnet in line: it frees the subnet of a deleted
// node, takes note of a subnet already in the spec, and otherwise reserves
// the lowest free one and writes it to the node.
func (c *Controller) sync(ctx context.Context, name string) error {
	node, err := c.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		c.releaseNode(name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("getting node %s: %w", name, err)
	}
	if c.occupy(node) {
		return nil
	}
	cidr, ok := c.set.allocate(name)
	if !ok {
		// Not retried: a freed subnet re-queues the nodes still waiting.
		c.log.Warn("no pod CIDR available", "node", name, "clusterCIDR", c.set.cluster)
		if c.recorder != nil {
			c.recorder.Eventf(nodeRef(node), v1.EventTypeNormal, reasonCIDRNotAvailable,
				"Node %s status is now: %s", node.Name, reasonCIDRNotAvailable)
		}
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{
		"podCIDR":  cidr.String(),
		"podCIDRs": []string{cidr.String()},
	}})
	if err != nil {
		return fmt.Errorf("encoding pod CIDR patch for node %s: %w", name, err)
	}
	_, err = c.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		c.releaseNode(name)
		return nil
	}
	if err != nil {
		// The reservation stays, so the retry writes the same subnet.
		return fmt.Errorf("setting pod CIDR %s on node %s: %w", cidr, name, err)
	}
	c.log.Info("assigned pod CIDR", "node", name, "podCIDR", cidr)
	return nil
}

// releaseNode frees a gone node's subnets and, since one is now free,
// re-queues the nodes still waiting for one. Nodes that carry a subnet are
// recorded again, in case one of them shared a subnet with the gone node.
func (c *Controller) releaseNode(name string) {
	c.set.release(name)
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		c.log.Warn("listing nodes after release", "node", name, "err", err)
		return
	}
	for _, n := range nodes {
		if !c.occupy(n) {
			c.queue.Add(n.Name)
		}
	}
}

// nodeCIDRs parses the node's pod CIDRs, falling back to spec.podCIDR for
// nodes written without spec.podCIDRs; unparsable values are skipped.
func nodeCIDRs(node *v1.Node) []netip.Prefix {
	raw := node.Spec.PodCIDRs
	if len(raw) == 0 && node.Spec.PodCIDR != "" {
		raw = []string{node.Spec.PodCIDR}
	}
	var out []netip.Prefix
	for _, s := range raw {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// nodeRef is the reference Kubernetes' node controllers attach their node
// events to.
func nodeRef(node *v1.Node) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}
}
