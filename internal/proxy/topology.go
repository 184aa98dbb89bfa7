package proxy

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// endpointSets is what one service port sends to from this node.
type endpointSets struct {
	// cluster serves policy Cluster traffic, local policy Local traffic.
	cluster, local []Endpoint
	// hasAny is true when some usable endpoint exists anywhere, so that a port with no
	// endpoint for a Local policy drops instead of rejecting.
	hasAny bool
}

// categorize picks the endpoints of one port the way upstream kube-proxy does:
// cluster traffic uses ready endpoints (narrowed by topology hints when every ready
// endpoint has them and one matches this node or zone), falling back to serving
// terminating endpoints only when no ready one is left; local traffic uses this node's
// ready endpoints, or its serving terminating ones when it has no ready one.
func categorize(sp *ServicePort, eps []Endpoint, nodeName, zone string) endpointSets {
	var out endpointSets
	if sp.usesClusterEndpoints() {
		mode := topologyMode(sp, eps, nodeName, zone)
		out.cluster = filter(eps, func(e Endpoint) bool { return e.Ready && availableForTopology(e, mode, nodeName, zone) })
		if len(out.cluster) == 0 {
			out.cluster = filter(eps, func(e Endpoint) bool {
				return e.Serving && e.Terminating && availableForTopology(e, mode, nodeName, zone)
			})
		}
		out.hasAny = len(out.cluster) > 0
	}
	if !sp.usesLocalEndpoints() {
		return out
	}
	var localReady, localTerminating bool
	for _, e := range eps {
		switch {
		case e.Ready:
			out.hasAny = true
			localReady = localReady || e.NodeName == nodeName
		case e.Serving && e.Terminating:
			out.hasAny = true
			localTerminating = localTerminating || e.NodeName == nodeName
		}
	}
	switch {
	case localReady:
		out.local = filter(eps, func(e Endpoint) bool { return e.NodeName == nodeName && e.Ready })
	case localTerminating:
		out.local = filter(eps, func(e Endpoint) bool { return e.NodeName == nodeName && e.Serving && e.Terminating })
	}
	return out
}

// topologyMode returns which hints narrow the cluster set: PreferSameNode when the
// service asks for it, every ready endpoint carries node hints and one names this node;
// otherwise PreferSameZone when every ready endpoint carries zone hints and one names
// this zone; otherwise "" (no narrowing). Like upstream, zone hints are honoured
// whenever the EndpointSlice controller wrote them.
func topologyMode(sp *ServicePort, eps []Endpoint, nodeName, zone string) string {
	allNode, forNode := true, false
	allZone, forZone := true, false
	for _, e := range eps {
		if !e.Ready {
			continue
		}
		if len(e.NodeHints) == 0 {
			allNode = false
		} else if slices.Contains(e.NodeHints, nodeName) {
			forNode = true
		}
		if len(e.ZoneHints) == 0 {
			allZone = false
		} else if slices.Contains(e.ZoneHints, zone) {
			forZone = true
		}
	}
	if sp.TrafficDistribution == v1.ServiceTrafficDistributionPreferSameNode && allNode && forNode {
		return v1.ServiceTrafficDistributionPreferSameNode
	}
	if allZone && forZone {
		return v1.ServiceTrafficDistributionPreferSameZone
	}
	return ""
}

func availableForTopology(e Endpoint, mode, nodeName, zone string) bool {
	switch mode {
	case v1.ServiceTrafficDistributionPreferSameNode:
		return slices.Contains(e.NodeHints, nodeName)
	case v1.ServiceTrafficDistributionPreferSameZone:
		return slices.Contains(e.ZoneHints, zone)
	}
	return true
}

// filter returns the endpoints keep accepts: eps itself when it accepts them all (the
// usual case, and no copy: callers only read the result), else a new slice.
func filter(eps []Endpoint, keep func(Endpoint) bool) []Endpoint {
	n := 0
	for i := range eps {
		if keep(eps[i]) {
			n++
		}
	}
	if n == len(eps) {
		return eps
	}
	if n == 0 {
		return nil
	}
	out := make([]Endpoint, 0, n)
	for _, e := range eps {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}
