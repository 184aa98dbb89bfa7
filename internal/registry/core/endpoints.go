package core

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// EndpointsResource returns the core/v1 Endpoints resource (the legacy endpoint list
// kept beside EndpointSlices): subset validation and kubectl's NAME ENDPOINTS AGE table.
func EndpointsResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"},
		Plural:     "endpoints",
		Singular:   "endpoints",
		ShortNames: []string{"ep"},
		Namespaced: true,
		// Kubernetes 1.33 deprecated v1 Endpoints and says so on every request.
		DeprecationWarning: "v1 Endpoints is deprecated in v1.33+; use discovery.k8s.io/v1 EndpointSlice",
		New:                func() runtime.Object { return &v1.Endpoints{} },
		NewList:            func() runtime.Object { return &v1.EndpointsList{} },
		Default: registry.Hook(func(ep *v1.Endpoints) {
			epDefault(ep)
		}),
		Validate:       registry.Func(ValidateEndpoints),
		ValidateUpdate: registry.FuncUpdate(func(obj, _ *v1.Endpoints) field.ErrorList { return ValidateEndpoints(obj) }),
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Endpoints", Type: "string", Description: v1.Endpoints{}.SwaggerDoc()["subsets"]},
			registry.AgeColumn,
		},
		Row: registry.FuncWith(func(ep *v1.Endpoints, now time.Time) []interface{} {
			return []interface{}{ep.Name, epFormat(ep), registry.HumanAge(ep.CreationTimestamp, now)}
		}),
	}
}

// epDefault sets port protocols to TCP, as Kubernetes' defaulter does.
func epDefault(ep *v1.Endpoints) {
	for i := range ep.Subsets {
		for j := range ep.Subsets[i].Ports {
			if ep.Subsets[i].Ports[j].Protocol == "" {
				ep.Subsets[i].Ports[j].Protocol = v1.ProtocolTCP
			}
		}
	}
}

// ValidateEndpoints checks the subsets of an Endpoints object with Kubernetes' rules:
// each subset has addresses, addresses are valid non-special IPs, hostnames are DNS
// labels, ports are named when there are several, valid numbers and protocols.
func ValidateEndpoints(ep *v1.Endpoints) field.ErrorList {
	if ep == nil {
		return nil
	}
	var errs field.ErrorList
	for i := range ep.Subsets {
		ss := &ep.Subsets[i]
		p := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(p, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, epValidateAddress(&ss.Addresses[j], p.Child("addresses").Index(j))...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, epValidateAddress(&ss.NotReadyAddresses[j], p.Child("notReadyAddresses").Index(j))...)
		}
		for j := range ss.Ports {
			errs = append(errs, epValidatePort(&ss.Ports[j], len(ss.Ports) > 1, p.Child("ports").Index(j))...)
		}
	}
	return errs
}

func epValidateAddress(a *v1.EndpointAddress, p *field.Path) field.ErrorList {
	errs := utilvalidation.IsValidIP(p.Child("ip"), a.IP)
	if a.Hostname != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(a.Hostname) {
			errs = append(errs, field.Invalid(p.Child("hostname"), a.Hostname, msg))
		}
	}
	if a.NodeName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*a.NodeName, false) {
			errs = append(errs, field.Invalid(p.Child("nodeName"), *a.NodeName, msg))
		}
	}
	return append(errs, svcValidateNonSpecialIP(a.IP, p.Child("ip"))...)
}

func epValidatePort(port *v1.EndpointPort, requireName bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && port.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if port.Name != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(port.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
		}
	}
	for _, msg := range utilvalidation.IsValidPortNum(int(port.Port)) {
		errs = append(errs, field.Invalid(p.Child("port"), port.Port, msg))
	}
	if port.Protocol == "" {
		errs = append(errs, field.Required(p.Child("protocol"), ""))
	} else if !svcIn(string(port.Protocol), svcProtocols) {
		errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, svcProtocols))
	}
	if port.AppProtocol != nil {
		for _, msg := range utilvalidation.IsQualifiedName(*port.AppProtocol) {
			errs = append(errs, field.Invalid(p.Child("appProtocol"), *port.AppProtocol, msg))
		}
	}
	return errs
}

// epFormat is kubectl's ENDPOINTS cell: up to three ip:port pairs (bare IPs for
// port-less subsets), then "+ N more...".
func epFormat(ep *v1.Endpoints) string {
	if len(ep.Subsets) == 0 {
		return "<none>"
	}
	const max = 3
	var list []string
	more := false
	count := 0
	for _, ss := range ep.Subsets {
		if len(ss.Ports) == 0 {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, a.IP)
			}
			continue
		}
		for _, port := range ss.Ports {
			count += len(ss.Addresses)
			for _, a := range ss.Addresses {
				if len(list) == max {
					more = true
					break
				}
				list = append(list, net.JoinHostPort(a.IP, strconv.Itoa(int(port.Port))))
			}
		}
	}
	ret := strings.Join(list, ",")
	if more {
		return fmt.Sprintf("%s + %d more...", ret, count-max)
	}
	return ret
}
