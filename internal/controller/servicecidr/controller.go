// Package servicecidr keeps networking.k8s.io/v1 ServiceCIDRs as Kubernetes does: the
// API server makes sure the default ServiceCIDR "kubernetes" exists and mirrors the
// cluster's service range (KeepDefault, upstream's defaultservicecidr controller), and
// the controller (upstream's kube-controller-manager servicecidrs controller) puts the
// protection finalizer on every ServiceCIDR, marks it Ready, and lets one being deleted
// go only when no address still in use depends on it.
//
// Upstream counts the addresses in use from IPAddress objects, which its ClusterIP
// allocator writes for every Service; tranche's allocator writes them too (in the
// Service's transaction), but its own allocation keys are what it allocates from, and
// an IPAddress can be deleted by hand, so an address is in use here when an IPAddress
// object names it or a Service holds it as a ClusterIP.
package servicecidr

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/tranche/tranche/internal/controller/worker"
)

const (
	// DefaultName is the ServiceCIDR that mirrors the API server's service range.
	DefaultName = "kubernetes"
	// Finalizer keeps a ServiceCIDR until no address in use depends on it.
	Finalizer = "networking.k8s.io/service-cidr-finalizer"
	// ReadyMessage is the Ready condition's message the controller writes.
	ReadyMessage = "Kubernetes Service CIDR is ready"
	// DefaultReadyMessage is the one the API server writes on the default ServiceCIDR.
	DefaultReadyMessage = "Kubernetes default Service CIDR is ready"
	// TerminatingMessage explains why a ServiceCIDR being deleted stays.
	TerminatingMessage = "There are still IPAddresses referencing the ServiceCIDR, please remove them or create a new ServiceCIDR"
	// DeletionGracePeriod is how long a deleted ServiceCIDR keeps its finalizer after
	// nothing depends on it, so that no allocator still hands out its addresses.
	DeletionGracePeriod = 10 * time.Second
)

// Config is what New needs.
type Config struct {
	Client kubernetes.Interface
	// Informers provides ServiceCIDRs, IPAddresses and Services; the caller starts it
	// after New.
	Informers informers.SharedInformerFactory
	Recorder  record.EventRecorder
	Clock     clock.WithTicker
	Logger    *slog.Logger
}

// Controller keeps the finalizer and Ready condition of every ServiceCIDR.
type Controller struct {
	client   kubernetes.Interface
	cidrs    networkinglisters.ServiceCIDRLister
	ips      networkinglisters.IPAddressLister
	services corelisters.ServiceLister
	synced   []cache.InformerSynced
	queue    workqueue.TypedRateLimitingInterface[string]
	clock    clock.WithTicker
	log      *slog.Logger
}

// New wires the controller to the factory's informers; it panics without Client or
// Informers, a wiring mistake.
func New(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("servicecidr.New: Client and Informers are required")
	}
	log, clk, _ := worker.Defaults(cfg.Logger, cfg.Clock, cfg.Recorder)
	cidrInf := cfg.Informers.Networking().V1().ServiceCIDRs()
	ipInf := cfg.Informers.Networking().V1().IPAddresses()
	svcInf := cfg.Informers.Core().V1().Services()
	c := &Controller{
		client: cfg.Client, cidrs: cidrInf.Lister(), ips: ipInf.Lister(), services: svcInf.Lister(),
		synced: []cache.InformerSynced{cidrInf.Informer().HasSynced, ipInf.Informer().HasSynced, svcInf.Informer().HasSynced},
		queue:  worker.NewQueue("servicecidrs", clk), clock: clk, log: log,
	}
	worker.Watch(cidrInf.Informer(), func(obj any) {
		worker.Enqueue(c.queue, obj)
		// Another range going away or appearing changes what a terminating one covers.
		c.enqueueTerminating()
	})
	// An address released may be what a terminating range waits for.
	worker.Watch(ipInf.Informer(), func(any) { c.enqueueTerminating() })
	worker.Watch(svcInf.Informer(), func(any) { c.enqueueTerminating() })
	return c
}

func (c *Controller) enqueueTerminating() {
	all, err := c.cidrs.List(labels.Everything())
	if err != nil {
		return
	}
	for _, cidr := range all {
		if cidr.DeletionTimestamp != nil {
			c.queue.Add(cidr.Name)
		}
	}
}

// Run syncs ServiceCIDRs with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop{Kind: "ServiceCIDR", Queue: c.queue, Synced: c.synced, Sync: c.sync,
		MaxRetries: worker.DefaultMaxRetries, Expected: apierrors.IsConflict, Logger: c.log}.Run(ctx, workers)
}

// HasSynced reports whether the caches the controller reads are filled.
func (c *Controller) HasSynced() bool { return worker.AllSynced(c.synced) }

func (c *Controller) sync(ctx context.Context, key string) error {
	cidr, err := c.cidrs.Get(key)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if cidr.DeletionTimestamp != nil {
		if !slices.Contains(cidr.Finalizers, Finalizer) {
			return nil
		}
		if used := c.orphaned(cidr); used != "" {
			c.log.Debug("ServiceCIDR still in use", "servicecidr", key, "address", used)
			return c.setReady(ctx, cidr, metav1.ConditionFalse, networkingv1.ServiceCIDRReasonTerminating, TerminatingMessage)
		}
		if wait := DeletionGracePeriod - c.clock.Since(cidr.DeletionTimestamp.Time); wait > 0 {
			c.queue.AddAfter(key, wait)
			return nil
		}
		out := cidr.DeepCopy()
		out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == Finalizer })
		_, err := c.client.NetworkingV1().ServiceCIDRs().Update(ctx, out, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	if !slices.Contains(cidr.Finalizers, Finalizer) {
		out := cidr.DeepCopy()
		out.Finalizers = append(out.Finalizers, Finalizer)
		if cidr, err = c.client.NetworkingV1().ServiceCIDRs().Update(ctx, out, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return c.setReady(ctx, cidr, metav1.ConditionTrue, "", ReadyMessage)
}

// setReady writes the Ready condition unless it already says the same.
func (c *Controller) setReady(ctx context.Context, cidr *networkingv1.ServiceCIDR, status metav1.ConditionStatus, reason, message string) error {
	cur := apimeta.FindStatusCondition(cidr.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	if cur != nil && cur.Status == status && cur.Reason == reason && cur.Message == message {
		return nil
	}
	out := cidr.DeepCopy()
	SetReady(out, status, reason, message, c.clock.Now())
	_, err := c.client.NetworkingV1().ServiceCIDRs().UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}

// SetReady sets cidr's Ready condition; its transition time changes only with its
// status.
func SetReady(cidr *networkingv1.ServiceCIDR, status metav1.ConditionStatus, reason, message string, now time.Time) {
	cond := metav1.Condition{Type: networkingv1.ServiceCIDRConditionReady, Status: status, Reason: reason, Message: message,
		LastTransitionTime: metav1.NewTime(now)}
	// metav1.Condition requires a reason, but upstream's Ready=True has none: keep the
	// condition as upstream writes it rather than invent one.
	if i := slices.IndexFunc(cidr.Status.Conditions, func(c metav1.Condition) bool { return c.Type == cond.Type }); i >= 0 {
		if cidr.Status.Conditions[i].Status == status {
			cond.LastTransitionTime = cidr.Status.Conditions[i].LastTransitionTime
		}
		cidr.Status.Conditions[i] = cond
		return
	}
	cidr.Status.Conditions = append(cidr.Status.Conditions, cond)
}

// orphaned returns an address in use inside cidr that no other live ServiceCIDR
// covers, or "" when cidr can go.
func (c *Controller) orphaned(cidr *networkingv1.ServiceCIDR) string {
	var mine, others []netip.Prefix
	for _, s := range cidr.Spec.CIDRs {
		if p, err := netip.ParsePrefix(s); err == nil {
			mine = append(mine, p)
		}
	}
	all, _ := c.cidrs.List(labels.Everything())
	for _, o := range all {
		if o.Name == cidr.Name || o.DeletionTimestamp != nil {
			continue
		}
		for _, s := range o.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				others = append(others, p)
			}
		}
	}
	orphan := func(s string) bool {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return false
		}
		return containedIn(mine, a) && !containedIn(others, a)
	}
	ips, _ := c.ips.List(labels.Everything())
	for _, ip := range ips {
		if orphan(ip.Name) {
			return ip.Name
		}
	}
	svcs, _ := c.services.List(labels.Everything())
	for _, svc := range svcs {
		for _, ip := range clusterIPs(svc) {
			if orphan(ip) {
				return ip
			}
		}
	}
	return ""
}

func clusterIPs(svc *v1.Service) []string {
	if len(svc.Spec.ClusterIPs) > 0 {
		return svc.Spec.ClusterIPs
	}
	return []string{svc.Spec.ClusterIP}
}

// containedIn reports whether a is inside one of the prefixes, neither the network nor
// (IPv4) the broadcast address, which the allocator never hands out.
func containedIn(prefixes []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range prefixes {
		if p.Contains(a) && a != p.Masked().Addr() {
			return true
		}
	}
	return false
}

// KeepDefault makes sure the default ServiceCIDR exists with the service range and is
// Ready, checking at once and then every interval until ctx ends, as kube-apiserver's
// default ServiceCIDR controller does. A default whose range differs (the cluster was
// restarted with another one) is reported, not rewritten: its addresses may be in use.
func KeepDefault(ctx context.Context, client kubernetes.Interface, prefix netip.Prefix, interval time.Duration, log *slog.Logger) {
	warned := false
	for {
		if err := ensureDefault(ctx, client, prefix, time.Now()); err != nil && ctx.Err() == nil {
			if !warned {
				log.Warn("default ServiceCIDR", "err", err)
			}
			warned = true
		} else {
			warned = false
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func ensureDefault(ctx context.Context, client kubernetes.Interface, prefix netip.Prefix, now time.Time) error {
	api := client.NetworkingV1().ServiceCIDRs()
	cidr, err := api.Get(ctx, DefaultName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cidr, err = api.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: DefaultName},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{prefix.Masked().String()}}}, metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	if want := []string{prefix.Masked().String()}; !slices.Equal(cidr.Spec.CIDRs, want) {
		return fmt.Errorf("ServiceCIDR %s has %v, the API server's service range is %v", DefaultName, cidr.Spec.CIDRs, want)
	}
	if cur := apimeta.FindStatusCondition(cidr.Status.Conditions, networkingv1.ServiceCIDRConditionReady); cur != nil && cur.Status != metav1.ConditionUnknown {
		return nil
	}
	out := cidr.DeepCopy()
	SetReady(out, metav1.ConditionTrue, "", DefaultReadyMessage, now)
	_, err = api.UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}
