package core

import (
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/tranche/tranche/internal/registry"
)

const (
	// nodeRoleLabelPrefix and nodeRoleLabel are where kubectl reads a node's roles from.
	nodeRoleLabelPrefix = "node-role.kubernetes.io/"
	nodeRoleLabel       = "kubernetes.io/role"
)

// nodeColumns are kubectl's node columns; the last five are -o wide.
var nodeColumns = []metav1.TableColumnDefinition{
	registry.NameColumn,
	{Name: "Status", Type: "string", Description: "The status of the node"},
	{Name: "Roles", Type: "string", Description: "The roles of the node"},
	registry.AgeColumn,
	{Name: "Version", Type: "string", Description: v1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
	{Name: "Internal-IP", Type: "string", Priority: 1, Description: v1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "External-IP", Type: "string", Priority: 1, Description: v1.NodeStatus{}.SwaggerDoc()["addresses"]},
	{Name: "OS-Image", Type: "string", Priority: 1, Description: v1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
	{Name: "Kernel-Version", Type: "string", Priority: 1, Description: v1.NodeSystemInfo{}.SwaggerDoc()["kernelVersion"]},
	{Name: "Container-Runtime", Type: "string", Priority: 1, Description: v1.NodeSystemInfo{}.SwaggerDoc()["containerRuntimeVersion"]},
}

// NodeResource is core/v1 nodes: cluster-scoped, short name "no", with a status
// subresource. Nodes register with their status, so create keeps it. spec.podCIDR(s) and
// spec.providerID may be set once and never changed; taints must be valid and unique per
// key and effect.
func NodeResource() registry.Resource {
	return registry.Resource{
		GVK:        v1.SchemeGroupVersion.WithKind("Node"),
		Plural:     "nodes",
		Singular:   "node",
		ShortNames: []string{"no"},
		Namespaced: false,
		New:        func() runtime.Object { return &v1.Node{} },
		NewList:    func() runtime.Object { return &v1.NodeList{} },
		Default:    registry.Hook(nodeDefault),
		Validate: registry.Func(func(node *v1.Node) field.ErrorList {
			return nodeValidate(node)
		}),
		ValidateUpdate: registry.FuncUpdate(nodeValidateUpdate),
		Status: &registry.StatusStrategy{
			PrepareForUpdate: registry.HookUpdate(func(node, _ *v1.Node) {
				nodeDefaultStatus(&node.Status)
			}),
			ValidateUpdate: registry.FuncUpdate(nodeValidateUpdate),
		},
		Columns: nodeColumns,
		Row:     registry.FuncWith(nodeRow),
		Fields: registry.Func(func(node *v1.Node) fields.Set {
			return fields.Set{"spec.unschedulable": strconv.FormatBool(node.Spec.Unschedulable)}
		}),
	}
}

// nodeDefault keeps podCIDR and podCIDRs consistent as a real API server's conversion
// does (the singular field wins when they differ) and defaults allocatable to capacity.
func nodeDefault(node *v1.Node) {
	if c := node.Spec.PodCIDR; c != "" && (len(node.Spec.PodCIDRs) == 0 || node.Spec.PodCIDRs[0] != c) {
		node.Spec.PodCIDRs = []string{c}
	}
	if len(node.Spec.PodCIDRs) > 0 {
		node.Spec.PodCIDR = node.Spec.PodCIDRs[0]
	}
	nodeDefaultStatus(&node.Status)
}

func nodeDefaultStatus(s *v1.NodeStatus) {
	if s.Allocatable == nil && s.Capacity != nil {
		s.Allocatable = s.Capacity.DeepCopy()
	}
}

func nodeValidate(node *v1.Node) field.ErrorList {
	allErrs := nodeValidateTaints(node.Spec.Taints, field.NewPath("spec", "taints"))
	for _, list := range []struct {
		name string
		rl   v1.ResourceList
	}{{"capacity", node.Status.Capacity}, {"allocatable", node.Status.Allocatable}} {
		for _, name := range podSortedResourceNames(list.rl) {
			q := list.rl[v1.ResourceName(name)]
			allErrs = append(allErrs, podValidateQuantity(name, q, field.NewPath("status", list.name, name))...)
		}
	}
	if len(node.Spec.PodCIDRs) > 0 {
		p := field.NewPath("spec", "podCIDRs")
		for i, c := range node.Spec.PodCIDRs {
			allErrs = append(allErrs, validation.IsValidCIDR(p.Index(i), c)...)
		}
		if len(node.Spec.PodCIDRs) > 1 {
			if dual, err := netutils.IsDualStackCIDRStrings(node.Spec.PodCIDRs); err != nil || !dual || len(node.Spec.PodCIDRs) > 2 {
				allErrs = append(allErrs, field.Invalid(p, node.Spec.PodCIDRs, "may specify no more than one CIDR for each IP family"))
			}
			seen := sets.New[string]()
			for i, c := range node.Spec.PodCIDRs {
				if seen.Has(c) {
					allErrs = append(allErrs, field.Duplicate(p.Index(i), c))
				}
				seen.Insert(c)
			}
		}
	}
	return allErrs
}

// nodeValidateTaints checks key, value and effect of each taint and that no two share a
// key and effect.
func nodeValidateTaints(taints []v1.Taint, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	unique := map[v1.TaintEffect]sets.Set[string]{}
	for i, t := range taints {
		p := fldPath.Index(i)
		allErrs = append(allErrs, metavalidation.ValidateLabelName(t.Key, p.Child("key"))...)
		if errs := content.IsLabelValue(t.Value); len(errs) != 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("value"), t.Value, strings.Join(errs, ";")))
		}
		allErrs = append(allErrs, podValidateTaintEffect(t.Effect, false, p.Child("effect"))...)
		if unique[t.Effect].Has(t.Key) {
			dup := field.Duplicate(p, t)
			dup.Detail = "taints must be unique by key and effect pair"
			allErrs = append(allErrs, dup)
			continue
		}
		if unique[t.Effect] == nil {
			unique[t.Effect] = sets.New[string]()
		}
		unique[t.Effect].Insert(t.Key)
	}
	return allErrs
}

// nodeValidateUpdate is the node's rules plus: no duplicate addresses, and podCIDRs and
// providerID only go from unset to set.
func nodeValidateUpdate(node, old *v1.Node) field.ErrorList {
	allErrs := nodeValidate(node)
	seen := map[v1.NodeAddress]bool{}
	for i, a := range node.Status.Addresses {
		if seen[a] {
			allErrs = append(allErrs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}
	if len(old.Spec.PodCIDRs) > 0 {
		changed := len(old.Spec.PodCIDRs) != len(node.Spec.PodCIDRs)
		for i := 0; !changed && i < len(old.Spec.PodCIDRs); i++ {
			changed = old.Spec.PodCIDRs[i] != node.Spec.PodCIDRs[i]
		}
		if changed {
			allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "podCIDRs"), "node updates may not change podCIDR except from \"\" to valid"))
		}
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != node.Spec.ProviderID {
		allErrs = append(allErrs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	return allErrs
}

// nodeRow prints STATUS from the Ready condition ("Ready", "NotReady", or "Unknown" when
// the node never reported one) plus ",SchedulingDisabled" for a cordoned node, and ROLES
// from the node-role.kubernetes.io/* labels.
func nodeRow(node *v1.Node, now time.Time) []interface{} {
	var status []string
	for _, c := range node.Status.Conditions {
		if c.Type != v1.NodeReady {
			continue
		}
		if c.Status == v1.ConditionTrue {
			status = []string{string(c.Type)}
		} else {
			status = []string{"Not" + string(c.Type)}
		}
	}
	if len(status) == 0 {
		status = append(status, "Unknown")
	}
	if node.Spec.Unschedulable {
		status = append(status, "SchedulingDisabled")
	}
	roles := nodeRoles(node)
	if roles == "" {
		roles = "<none>"
	}
	unknown := func(s string) string {
		if s == "" {
			return "<unknown>"
		}
		return s
	}
	info := node.Status.NodeInfo
	return []interface{}{
		node.Name,
		strings.Join(status, ","),
		roles,
		registry.HumanAge(node.CreationTimestamp, now),
		info.KubeletVersion,
		nodeAddress(node, v1.NodeInternalIP),
		nodeAddress(node, v1.NodeExternalIP),
		unknown(info.OSImage),
		unknown(info.KernelVersion),
		unknown(info.ContainerRuntimeVersion),
	}
}

func nodeRoles(node *v1.Node) string {
	roles := sets.New[string]()
	for k, v := range node.Labels {
		switch {
		case strings.HasPrefix(k, nodeRoleLabelPrefix):
			if role := strings.TrimPrefix(k, nodeRoleLabelPrefix); role != "" {
				roles.Insert(role)
			}
		case k == nodeRoleLabel && v != "":
			roles.Insert(v)
		}
	}
	return strings.Join(sets.List(roles), ",")
}

func nodeAddress(node *v1.Node, t v1.NodeAddressType) string {
	for _, a := range node.Status.Addresses {
		if a.Type == t {
			return a.Address
		}
	}
	return "<none>"
}
