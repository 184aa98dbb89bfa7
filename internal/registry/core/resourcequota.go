package core

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	api "k8s.io/kubernetes/pkg/apis/core"
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/tranche/tranche/internal/registry"
)

// ResourceQuotaResource serves core/v1 resourcequotas (short name quota) with the status
// subresource: Kubernetes' validation (run on the internal types, so field paths and
// wording are upstream's), status kept out of spec writes and cleared on create, the
// request/limit warning upstream gives on create, and kube-apiserver's NAME REQUEST LIMIT
// AGE table.
func ResourceQuotaResource() registry.Resource {
	return registry.Strategy[*v1.ResourceQuota]{
		PrepareForCreate: func(q *v1.ResourceQuota) { q.Status = v1.ResourceQuotaStatus{} },
		Validate:         ValidateResourceQuota,
		ValidateUpdate:   ValidateResourceQuotaUpdate,
		Warnings: func(q, old *v1.ResourceQuota) []string {
			if old != nil {
				return nil
			}
			return resourceQuotaWarnings(q)
		},
		StatusValidateUpdate: ValidateResourceQuotaStatusUpdate,
		Row: func(q *v1.ResourceQuota, now time.Time) []interface{} {
			request, limit := QuotaColumns(q)
			return []interface{}{q.Name, request, limit, registry.HumanAge(q.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:        v1.SchemeGroupVersion.WithKind("ResourceQuota"),
		Plural:     "resourcequotas",
		Singular:   "resourcequota",
		ShortNames: []string{"quota"},
		Namespaced: true,
		New:        func() runtime.Object { return &v1.ResourceQuota{} },
		NewList:    func() runtime.Object { return &v1.ResourceQuotaList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Request", Type: "string", Description: "Request represents a minimum amount of cpu/memory that a container may consume."},
			{Name: "Limit", Type: "string", Description: "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node."},
			registry.AgeColumn,
		},
	})
}

// QuotaColumns returns the REQUEST and LIMIT cells of a quota's row: "name: used/hard"
// for every resource of status.hard in name order, limits.* in LIMIT and the rest in
// REQUEST, as kube-apiserver prints them.
func QuotaColumns(q *v1.ResourceQuota) (request, limit string) {
	names := make([]string, 0, len(q.Status.Hard))
	for name := range q.Status.Hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	var req, lim []string
	for _, name := range names {
		used, hard := q.Status.Used[v1.ResourceName(name)], q.Status.Hard[v1.ResourceName(name)]
		cell := fmt.Sprintf("%s: %s/%s", name, used.String(), hard.String())
		if pieces := strings.Split(name, "."); len(pieces) > 1 && pieces[0] == "limits" {
			lim = append(lim, cell)
		} else {
			req = append(req, cell)
		}
	}
	return strings.Join(req, ", "), strings.Join(lim, ", ")
}

// internalQuota converts q to the internal type upstream's validation takes.
func internalQuota(q *v1.ResourceQuota) *api.ResourceQuota {
	out := &api.ResourceQuota{}
	if err := apiv1.Convert_v1_ResourceQuota_To_core_ResourceQuota(q, out, nil); err != nil {
		panic(fmt.Sprintf("converting ResourceQuota %s/%s: %v", q.Namespace, q.Name, err))
	}
	return out
}

// ValidateResourceQuota is Kubernetes' ValidateResourceQuota without metadata: hard
// resource names and quantities, scopes and the scope selector, each checked against
// the resources it may limit.
func ValidateResourceQuota(q *v1.ResourceQuota) field.ErrorList {
	return registry.WithoutMetadata(corevalidation.ValidateResourceQuota(internalQuota(q)))
}

// ValidateResourceQuotaUpdate is Kubernetes' update check: the spec rules, and scopes
// that may not change.
func ValidateResourceQuotaUpdate(q, old *v1.ResourceQuota) field.ErrorList {
	return registry.WithoutMetadata(corevalidation.ValidateResourceQuotaUpdate(internalQuota(q), internalQuota(old)))
}

// ValidateResourceQuotaStatusUpdate checks status.hard and status.used names and values.
func ValidateResourceQuotaStatusUpdate(q, old *v1.ResourceQuota) field.ErrorList {
	return registry.WithoutMetadata(corevalidation.ValidateResourceQuotaStatusUpdate(internalQuota(q), internalQuota(old)))
}

// resourceQuotaWarnings is upstream's create warning for a request above its limit
// (requests.cpu or cpu above limits.cpu, and so on).
func resourceQuotaWarnings(q *v1.ResourceQuota) []string {
	var out []string
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceStorage, v1.ResourceEphemeralStorage} {
		reqName := v1.ResourceName("requests." + string(name))
		req, reqOK := q.Spec.Hard[reqName]
		if !reqOK && (name == v1.ResourceCPU || name == v1.ResourceMemory) {
			if req, reqOK = q.Spec.Hard[name]; reqOK {
				reqName = name
			}
		}
		limName := v1.ResourceName("limits." + string(name))
		lim, limOK := q.Spec.Hard[limName]
		if reqOK && limOK && req.Cmp(lim) > 0 {
			out = append(out, fmt.Sprintf("ResourceQuota %s (%s) should be less than %s (%s)", reqName, req.String(), limName, lim.String()))
		}
	}
	return out
}
