package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records Kubernetes Events; client-go's record.EventRecorder is one.
type EventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Reasons of the Warning Events the proxy records on objects it skips.
const (
	// ReasonUnusableEndpointAddress is recorded on an EndpointSlice listing endpoints
	// the proxy cannot send traffic to; those endpoints are skipped.
	ReasonUnusableEndpointAddress = "UnusableEndpointAddress"
	// ReasonRulesRejected is recorded on a Service whose rules the node's kernel refused;
	// the Service is left unprogrammed on that node until it changes or a full sync.
	ReasonRulesRejected = "RulesRejectedByKernel"
)

// UnusableAddress is one endpoint address of an EndpointSlice the proxy will not
// program, or a whole slice (Field "addressType") whose kind of address it does not
// program at all.
type UnusableAddress struct {
	// Field is the field path in the slice: endpoints[i].addresses[j] or addressType.
	Field   string
	Address string
	// Reason says what is wrong with the address, for people.
	Reason string
}

// String returns `field "address": reason`.
func (u UnusableAddress) String() string {
	return fmt.Sprintf("%s %q: %s", u.Field, u.Address, u.Reason)
}

// broadcast is the limited broadcast address, never a unicast backend.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// endpointAddress parses an address of an IPv4 EndpointSlice and says why the proxy
// cannot DNAT to it ("" when it can). The API server refuses some of these already;
// the proxy checks again because it programs whatever the watch delivers, and some
// (multicast, broadcast, an address of the service CIDR) are valid API input: a
// ClusterIP as a backend would not work either, since a connection is DNATed once.
func endpointAddress(s string, serviceCIDR netip.Prefix) (netip.Addr, string) {
	ip, err := netip.ParseAddr(s)
	switch {
	case err != nil:
		return ip, "not an IP address"
	case !ip.Is4():
		return ip, "not an IPv4 address, as the slice's addressType IPv4 requires"
	case ip.IsUnspecified():
		return ip, "the unspecified address"
	case ip.IsLoopback():
		return ip, "a loopback address, which would be the node itself"
	case ip.IsMulticast():
		return ip, "a multicast address"
	case ip == broadcast:
		return ip, "the broadcast address"
	case ip.IsLinkLocalUnicast():
		return ip, "a link-local address, which belongs to the node's own link"
	case serviceCIDR.IsValid() && serviceCIDR.Contains(ip):
		return ip, "inside the service CIDR " + serviceCIDR.String() + ": a connection is translated once, so a Service address cannot be a backend"
	}
	return ip, ""
}

// unusableAddresses lists what the proxy skips in a slice it would otherwise program.
// Only the first address of an endpoint is used, as upstream's proxies do (the API
// calls an endpoint's addresses fungible), so only that one is checked. Non-IPv4
// slices are none of this table's business except FQDN ones, which no proxy programs.
func unusableAddresses(s *discoveryv1.EndpointSlice, serviceCIDR netip.Prefix) []UnusableAddress {
	switch s.AddressType {
	case discoveryv1.AddressTypeIPv4:
	case discoveryv1.AddressTypeFQDN:
		return []UnusableAddress{{Field: "addressType", Address: string(s.AddressType),
			Reason: "the service proxy programs IP addresses only; the whole slice is skipped"}}
	default:
		return nil
	}
	var out []UnusableAddress
	for i, e := range s.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		if _, why := endpointAddress(e.Addresses[0], serviceCIDR); why != "" {
			out = append(out, UnusableAddress{Field: fmt.Sprintf("endpoints[%d].addresses[0]", i), Address: e.Addresses[0], Reason: why})
		}
	}
	return out
}

// maxListed bounds the problems an Event or log line spells out, so that a slice of a
// thousand bad endpoints makes one readable message.
const maxListed = 5

// listUnusable joins the first maxListed problems and counts the rest.
func listUnusable(us []UnusableAddress) string {
	parts := make([]string, 0, maxListed+1)
	for i, u := range us {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(us)-maxListed))
			break
		}
		parts = append(parts, u.String())
	}
	return strings.Join(parts, "; ")
}

// reportUnusable tells about the newly unusable addresses of a slice, once: a Warning
// Event on the slice and one log line.
func (p *proxierCore) reportUnusable(s *discoveryv1.EndpointSlice, us []UnusableAddress) {
	list := listUnusable(us)
	p.cfg.Logger.Warn("skipping unusable endpoint addresses", "node", p.cfg.NodeName,
		"endpointSlice", s.Namespace+"/"+s.Name, "service", s.Namespace+"/"+s.Labels[discoveryv1.LabelServiceName], "unusable", list)
	if p.cfg.Recorder != nil {
		p.cfg.Recorder.Eventf(s, v1.EventTypeWarning, ReasonUnusableEndpointAddress,
			"the service proxy on node %s skips what it cannot send traffic to: %s", p.cfg.NodeName, list)
	}
}

// maxErrorInEvent bounds the kernel's error quoted in an Event.
const maxErrorInEvent = 600

// reportRejected tells that a service's rules were refused by the kernel and left out:
// a Warning Event on the Service and one log line.
func (p *Proxier) reportRejected(ref *v1.ObjectReference, err error) {
	p.cfg.Logger.Warn("the kernel refused a service's rules: the service is not programmed until it changes or the next full sync",
		"node", p.cfg.NodeName, "service", ref.Namespace+"/"+ref.Name, "err", err)
	if p.cfg.Recorder == nil {
		return
	}
	msg := err.Error()
	if len(msg) > maxErrorInEvent {
		cut := maxErrorInEvent
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + " [...]"
	}
	p.cfg.Recorder.Eventf(ref, v1.EventTypeWarning, ReasonRulesRejected,
		"the kernel of node %s refused this Service's nftables rules, so that node does not proxy it until it changes or the next full sync (every other Service stays programmed): %s",
		p.cfg.NodeName, msg)
}
