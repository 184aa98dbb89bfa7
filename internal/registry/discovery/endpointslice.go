// Package discovery serves discovery.k8s.io/v1: EndpointSlices, the tranches the proxy and
// DNS read to find a Service's backends.
package discovery

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// Limits Kubernetes' EndpointSlice validation enforces. maxPorts is the validator's limit,
// which is looser than the 100 the API documentation promises.
const (
	maxEndpoints      = 1000
	maxAddresses      = 100
	maxPorts          = 20000
	maxTopologyLabels = 16
	maxZoneHints      = 8
	maxNodeHints      = 8
)

var (
	supportedAddressTypes = []discoveryv1.AddressType{discoveryv1.AddressTypeFQDN, discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
	supportedProtocols    = []string{"SCTP", "TCP", "UDP"}
)

// EndpointSliceResource returns discovery.k8s.io/v1 EndpointSlice: namespaced, no short
// name, no status, the NAME ADDRESSTYPE PORTS ENDPOINTS AGE table, and Kubernetes'
// defaulting (port name "" and protocol TCP) and validation.
func EndpointSliceResource() registry.Resource {
	return registry.Resource{
		GVK:              discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"),
		Plural:           "endpointslices",
		Singular:         "endpointslice",
		Namespaced:       true,
		New:              func() runtime.Object { return &discoveryv1.EndpointSlice{} },
		NewList:          func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
		TrackGeneration:  true,
		PrepareForCreate: prepareForCreate,
		PrepareForUpdate: prepareForUpdate,
		Default:          defaultEndpointSlice,
		Validate:         registry.Func(ValidateEndpointSlice),
		ValidateUpdate:   registry.FuncUpdate(ValidateEndpointSliceUpdate),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "AddressType", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["addressType"]},
			{Name: "Ports", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["ports"]},
			{Name: "Endpoints", Type: "string", Description: discoveryv1.EndpointSlice{}.SwaggerDoc()["endpoints"]},
			registry.AgeColumn,
		},
		Row: endpointSliceRow,
	}
}

// asSlice returns obj as an EndpointSlice, or nil when it is something else.
func asSlice(obj runtime.Object) *discoveryv1.EndpointSlice {
	s, _ := obj.(*discoveryv1.EndpointSlice)
	return s
}

// prepareForCreate drops deprecatedTopology: the v1 API documents writes to it as ignored.
func prepareForCreate(obj runtime.Object) {
	if s := asSlice(obj); s != nil {
		dropDeprecatedTopology(s)
	}
}

// prepareForUpdate drops deprecatedTopology unless the endpoints are unchanged, so an
// update that does not touch endpoints keeps what an older API version stored.
func prepareForUpdate(obj, old runtime.Object) {
	s, o := asSlice(obj), asSlice(old)
	if s == nil {
		return
	}
	if o != nil && apiequality.Semantic.DeepEqual(s.Endpoints, o.Endpoints) {
		return
	}
	dropDeprecatedTopology(s)
}

func dropDeprecatedTopology(s *discoveryv1.EndpointSlice) {
	for i := range s.Endpoints {
		s.Endpoints[i].DeprecatedTopology = nil
	}
}

// defaultEndpointSlice sets each port's name to "" and protocol to TCP when unset, as the
// v1 defaulters do.
func defaultEndpointSlice(obj runtime.Object) {
	s := asSlice(obj)
	if s == nil {
		return
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		if p.Name == nil {
			p.Name = new("")
		}
		if p.Protocol == nil {
			p.Protocol = new(corev1.ProtocolTCP)
		}
	}
}

// ValidateEndpointSlice checks a slice's address type, endpoints and ports the way
// Kubernetes does. A nil slice has nothing to check.
func ValidateEndpointSlice(s *discoveryv1.EndpointSlice) field.ErrorList {
	if s == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateAddressType(s.AddressType)...)
	errs = append(errs, validateEndpoints(s.Endpoints, s.AddressType, field.NewPath("endpoints"))...)
	errs = append(errs, validatePorts(s.Ports, field.NewPath("ports"))...)
	return errs
}

// ValidateEndpointSliceUpdate checks s like ValidateEndpointSlice and keeps addressType
// immutable.
func ValidateEndpointSliceUpdate(s, old *discoveryv1.EndpointSlice) field.ErrorList {
	errs := ValidateEndpointSlice(s)
	if s != nil && old != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(s.AddressType, old.AddressType, field.NewPath("addressType"))...)
	}
	return errs
}

func validateAddressType(t discoveryv1.AddressType) field.ErrorList {
	p := field.NewPath("addressType")
	switch t {
	case "":
		return field.ErrorList{field.Required(p, "")}
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, t, supportedAddressTypes)}
}

func validateEndpoints(endpoints []discoveryv1.Endpoint, addrType discoveryv1.AddressType, fldPath *field.Path) field.ErrorList {
	if len(endpoints) > maxEndpoints {
		return field.ErrorList{field.TooMany(fldPath, len(endpoints), maxEndpoints)}
	}
	var errs field.ErrorList
	for i := range endpoints {
		ep := &endpoints[i]
		idxPath := fldPath.Index(i)
		addrPath := idxPath.Child("addresses")
		if len(ep.Addresses) == 0 {
			errs = append(errs, field.Required(addrPath, "must contain at least 1 address"))
		} else if len(ep.Addresses) > maxAddresses {
			errs = append(errs, field.TooMany(addrPath, len(ep.Addresses), maxAddresses))
		}
		for j, addr := range ep.Addresses {
			errs = append(errs, validateAddress(addr, addrType, addrPath.Index(j))...)
		}
		if ep.NodeName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*ep.NodeName, false) {
				errs = append(errs, field.Invalid(idxPath.Child("nodeName"), *ep.NodeName, msg))
			}
		}
		topoPath := idxPath.Child("deprecatedTopology")
		if len(ep.DeprecatedTopology) > maxTopologyLabels {
			errs = append(errs, field.TooMany(topoPath, len(ep.DeprecatedTopology), maxTopologyLabels))
		}
		errs = append(errs, metav1validation.ValidateLabels(ep.DeprecatedTopology, topoPath)...)
		if ep.Hostname != nil {
			for _, msg := range validation.IsDNS1123Label(*ep.Hostname) {
				errs = append(errs, field.Invalid(idxPath.Child("hostname"), *ep.Hostname, msg))
			}
		}
		if ep.Hints != nil {
			errs = append(errs, validateHints(ep.Hints, idxPath.Child("hints"))...)
		}
	}
	return errs
}

// validateAddress checks one address against the slice's address type; unknown types are
// already reported on addressType, so their addresses are not checked.
func validateAddress(addr string, addrType discoveryv1.AddressType, p *field.Path) field.ErrorList {
	switch addrType {
	case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6:
		if errs := validation.IsValidIPForLegacyField(p, addr, true, nil); len(errs) > 0 {
			return errs
		}
		ip := net.ParseIP(addr)
		if addrType == discoveryv1.AddressTypeIPv4 && ip.To4() == nil {
			return field.ErrorList{field.Invalid(p, addr, "must be a valid IPv4 address")}
		}
		if addrType == discoveryv1.AddressTypeIPv6 && ip.To4() != nil {
			return field.ErrorList{field.Invalid(p, addr, "must be a valid IPv6 address")}
		}
		return validateEndpointIP(ip, addr, p)
	case discoveryv1.AddressTypeFQDN:
		return validation.IsFullyQualifiedDomainName(p, addr)
	}
	return nil
}

// validateEndpointIP rejects addresses that cannot be a backend: unspecified and loopback
// addresses make no sense there, and link-local ones belong to the node (metadata services).
func validateEndpointIP(ip net.IP, addr string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(p, addr, fmt.Sprintf("may not be unspecified (%v)", addr)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(p, addr, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(p, addr, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(p, addr, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

func validateHints(h *discoveryv1.EndpointHints, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	zonesPath := fldPath.Child("forZones")
	if len(h.ForZones) > maxZoneHints {
		errs = append(errs, field.TooMany(zonesPath, len(h.ForZones), maxZoneHints))
	} else {
		seen := sets.New[string]()
		for i, z := range h.ForZones {
			p := zonesPath.Index(i).Child("name")
			if seen.Has(z.Name) {
				errs = append(errs, field.Duplicate(p, z.Name))
			}
			seen.Insert(z.Name)
			for _, msg := range validation.IsValidLabelValue(z.Name) {
				errs = append(errs, field.Invalid(p, z.Name, msg))
			}
		}
	}
	nodesPath := fldPath.Child("forNodes")
	if len(h.ForNodes) > maxNodeHints {
		errs = append(errs, field.TooMany(nodesPath, len(h.ForNodes), maxNodeHints))
		return errs
	}
	seen := sets.New[string]()
	for i, n := range h.ForNodes {
		p := nodesPath.Index(i).Child("name")
		if seen.Has(n.Name) {
			errs = append(errs, field.Duplicate(p, n.Name))
		}
		seen.Insert(n.Name)
		for _, msg := range apivalidation.NameIsDNSSubdomain(n.Name, false) {
			errs = append(errs, field.Invalid(p, n.Name, msg))
		}
	}
	return errs
}

func validatePorts(ports []discoveryv1.EndpointPort, fldPath *field.Path) field.ErrorList {
	if len(ports) > maxPorts {
		return field.ErrorList{field.TooMany(fldPath, len(ports), maxPorts)}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range ports {
		port := &ports[i]
		idxPath := fldPath.Index(i)
		name := ""
		if port.Name != nil {
			name = *port.Name
		}
		if name != "" {
			for _, msg := range validation.IsDNS1123Label(name) {
				errs = append(errs, field.Invalid(idxPath.Child("name"), name, msg))
			}
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(idxPath.Child("name"), name))
		}
		names.Insert(name)
		if port.Protocol == nil {
			errs = append(errs, field.Required(idxPath.Child("protocol"), ""))
		} else if !sets.New(supportedProtocols...).Has(string(*port.Protocol)) {
			errs = append(errs, field.NotSupported(idxPath.Child("protocol"), *port.Protocol, supportedProtocols))
		}
		if port.Port != nil {
			if p := *port.Port; p < 0 || p > 65535 {
				errs = append(errs, field.Invalid(idxPath.Child("port"), p, validation.InclusiveRangeError(0, 65535)))
			}
		}
		if port.AppProtocol != nil {
			for _, msg := range validation.IsQualifiedName(*port.AppProtocol) {
				errs = append(errs, field.Invalid(idxPath.Child("appProtocol"), *port.AppProtocol, msg))
			}
		}
	}
	return errs
}

// endpointSliceRow prints a slice the way kubectl's server-side printer does: at most three
// ports and three addresses, the rest counted as "+ N more...", "<unset>" for an empty list.
func endpointSliceRow(obj runtime.Object, now time.Time) []interface{} {
	s := asSlice(obj)
	if s == nil {
		return nil
	}
	return []interface{}{
		s.Name,
		string(s.AddressType),
		formatPorts(s.Ports),
		formatEndpoints(s.Endpoints),
		registry.HumanAge(s.CreationTimestamp, now),
	}
}

// shownItems is how many ports or addresses a table cell lists before summarising.
const shownItems = 3

// formatPorts lists port numbers; a nil port ("all ports") shows its name, or "*".
func formatPorts(ports []discoveryv1.EndpointPort) string {
	var list []string
	for _, p := range ports {
		if len(list) == shownItems {
			break
		}
		switch {
		case p.Port != nil:
			list = append(list, strconv.Itoa(int(*p.Port)))
		case p.Name != nil:
			list = append(list, *p.Name)
		default:
			list = append(list, "*")
		}
	}
	return listWithMore(list, len(ports))
}

func formatEndpoints(endpoints []discoveryv1.Endpoint) string {
	var list []string
	count := 0
	for _, ep := range endpoints {
		for _, addr := range ep.Addresses {
			if len(list) < shownItems {
				list = append(list, addr)
			}
			count++
		}
	}
	return listWithMore(list, count)
}

func listWithMore(list []string, count int) string {
	s := strings.Join(list, ",")
	if count > shownItems {
		return fmt.Sprintf("%s + %d more...", s, count-shownItems)
	}
	if s == "" {
		return "<unset>"
	}
	return s
}
