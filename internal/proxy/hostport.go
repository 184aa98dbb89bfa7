package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/nftsession"
)

// HostPortTable is the nftables table (family ip) in which a node maps its pods'
// hostPorts, the job the CNI portmap plugin does under kubelet: a connection to
// hostIP:hostPort (any of the node's own addresses when hostIP is empty or 0.0.0.0)
// with the port's protocol is DNATed to podIP:containerPort, from other machines
// (prerouting) and from the node itself (output); loopback sources are masqueraded so
// that the pod can answer.
const HostPortTable = "tranche-hostport"

// HostPortMapping is one container port with a hostPort of a pod on this node.
type HostPortMapping struct {
	HostIP        string // "" for every local address
	Protocol      string // "tcp", "udp" or "sctp"
	HostPort      int32
	PodIP         string
	ContainerPort int32
}

// HostPortMappings returns the mappings of pods, sorted: container ports with a
// hostPort of pods that have an IPv4 address of their own and have not ended
// (host-network pods listen on the node's ports themselves).
func HostPortMappings(pods []*v1.Pod) []HostPortMapping {
	var out []HostPortMapping
	for _, pod := range pods {
		if pod.Spec.HostNetwork || pod.Status.PodIP == "" ||
			pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		podIP, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil || !podIP.Is4() {
			continue
		}
		for _, c := range pod.Spec.Containers {
			for _, p := range c.Ports {
				if p.HostPort <= 0 {
					continue
				}
				hostIP := p.HostIP
				if hostIP == "0.0.0.0" {
					hostIP = ""
				}
				if a, err := netip.ParseAddr(hostIP); hostIP != "" && (err != nil || !a.Is4()) {
					continue
				}
				proto := strings.ToLower(string(p.Protocol))
				if proto == "" {
					proto = "tcp"
				}
				out = append(out, HostPortMapping{HostIP: hostIP, Protocol: proto, HostPort: p.HostPort,
					PodIP: podIP.String(), ContainerPort: p.ContainerPort})
			}
		}
	}
	slices.SortFunc(out, func(a, b HostPortMapping) int {
		return strings.Compare(a.key(), b.key())
	})
	return slices.Compact(out)
}

func (m HostPortMapping) key() string {
	return fmt.Sprintf("%s/%05d/%s/%s:%05d", m.Protocol, m.HostPort, m.HostIP, m.PodIP, m.ContainerPort)
}

// rule is the DNAT rule of m in the hostports chain. A specific hostIP comes first
// (HostPortMappings sorts "" before any address, so the loop in hostPortTransaction
// writes specific ones first).
func (m HostPortMapping) rule() string {
	match := "fib daddr type local"
	if m.HostIP != "" {
		match = "ip daddr " + m.HostIP
	}
	return knftables.Concat(match, m.Protocol, "dport", m.HostPort, "dnat to", fmt.Sprintf("%s:%d", m.PodIP, m.ContainerPort))
}

// hostPortTransaction rewrites the whole table to hold mappings (the table is
// created first so that deleting it always succeeds: one atomic transaction).
func hostPortTransaction(tx *knftables.Transaction, mappings []HostPortMapping) {
	tx.Add(&knftables.Table{Comment: ptr.To("pods' hostPorts (tranche agent)")})
	tx.Delete(&knftables.Table{})
	tx.Add(&knftables.Table{Comment: ptr.To("pods' hostPorts (tranche agent)")})
	tx.Add(&knftables.Chain{Name: "hostports"})
	for _, c := range []struct {
		name     string
		hook     knftables.BaseChainHook
		priority knftables.BaseChainPriority
		rule     string
	}{
		{"prerouting", knftables.PreroutingHook, knftables.DNATPriority, "jump hostports"},
		{"output", knftables.OutputHook, knftables.DNATPriority, "jump hostports"},
		{"postrouting", knftables.PostroutingHook, knftables.SNATPriority, "ip saddr 127.0.0.0/8 ct status dnat masquerade"},
	} {
		tx.Add(&knftables.Chain{Name: c.name, Type: ptr.To(knftables.NATType), Hook: ptr.To(c.hook), Priority: ptr.To(c.priority)})
		tx.Add(&knftables.Rule{Chain: c.name, Rule: c.rule})
	}
	// Specific host addresses before the any-address rules of the same port.
	ordered := slices.Clone(mappings)
	slices.SortStableFunc(ordered, func(a, b HostPortMapping) int {
		return compareBool(a.HostIP == "", b.HostIP == "")
	})
	for _, m := range ordered {
		tx.Add(&knftables.Rule{Chain: "hostports", Rule: m.rule()})
	}
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// HostPorts keeps HostPortTable in step with the node's pods.
type HostPorts struct {
	NFT      knftables.Interface // for HostPortTable, family ip
	Client   kubernetes.Interface
	NodeName string
	Logger   *slog.Logger
}

// Run watches the node's pods and rewrites the table whenever their mappings change,
// retrying a failed write every second, until ctx ends.
func (h *HostPorts) Run(ctx context.Context) error {
	log := h.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(h.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", h.NodeName).String()
	}))
	pods := factory.Core().V1().Pods()
	wake := make(chan struct{}, 1)
	poke := func(any) {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, n any) { poke(n) }, DeleteFunc: poke,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	var applied []HostPortMapping
	first := true
	poke(nil)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		}
		list, err := pods.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		want := HostPortMappings(list)
		if !first && slices.Equal(want, applied) {
			continue
		}
		tx := h.NFT.NewTransaction()
		hostPortTransaction(tx, want)
		if err := h.NFT.Run(ctx, tx); err != nil {
			log.Error("writing hostPort rules", "table", HostPortTable, "err", err)
			time.AfterFunc(time.Second, func() { poke(nil) })
			continue
		}
		log.Debug("hostPort rules written", "mappings", len(want))
		applied, first = want, false
	}
}

// RunHostPorts runs HostPorts for nodeName on the kernel's nftables of the network
// namespace the agent runs in (its node's).
func RunHostPorts(ctx context.Context, client kubernetes.Interface, nodeName string, log *slog.Logger) error {
	nft, err := nftsession.New(knftables.IPv4Family, HostPortTable)
	if err != nil {
		return fmt.Errorf("hostPorts: %w", err)
	}
	defer nft.Close()
	return (&HostPorts{NFT: nft, Client: client, NodeName: nodeName, Logger: log}).Run(ctx)
}
