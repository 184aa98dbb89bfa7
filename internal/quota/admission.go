package quota

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/resourcequota"
	resourcequotaapi "k8s.io/apiserver/pkg/admission/plugin/resourcequota/apis/resourcequota"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // v1 <-> internal conversions for the LimitRanger
	"k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
	"k8s.io/kubernetes/pkg/quota/v1/install"
	"k8s.io/kubernetes/plugin/pkg/admission/limitranger"

	"github.com/tranche/tranche/internal/apiserver"
)

// evaluatorWorkers is how many namespaces the quota plugin evaluates at once
// (kube-apiserver's default).
const evaluatorWorkers = 5

// Evaluators returns the usage evaluators of Kubernetes' core quota registry (pods,
// services, persistentvolumeclaims and the legacy object counts) listing objects with
// f, nil for admission, which only needs the usage of the object written. Resource
// claims are left out: their evaluator needs dynamic resource allocation's informers.
func Evaluators(f quotav1.ListerForResourceFunc) ([]quotav1.Evaluator, error) {
	return core.NewEvaluators(f, nil, func(gvr schema.GroupVersionResource) bool {
		return gvr.Group != "resource.k8s.io"
	})
}

// Configuration is Kubernetes' quota configuration with those evaluators and the
// resources quota ignores (events, reviews, bindings).
func Configuration(f quotav1.ListerForResourceFunc) (quotav1.Configuration, error) {
	evaluators, err := Evaluators(f)
	if err != nil {
		return nil, err
	}
	return generic.NewConfiguration(evaluators, install.DefaultIgnoredResources()), nil
}

// ResourceQuota is the ResourceQuota admission plugin as a Validator (kube-apiserver
// runs it last): it charges a create or usage-changing update to every matching quota
// of the namespace, or refuses it with upstream's 403 ("exceeded quota: ...", "must
// specify ...").
type ResourceQuota struct {
	plugin *resourcequota.QuotaAdmission
}

var _ apiserver.Validator = (*ResourceQuota)(nil)

// NewResourceQuota builds the plugin over client (which updates quota status, and reads
// a quota whose status f's informer has not shown yet: see freshQuotas) and the quota
// informer of f; the caller starts f. The plugin's workers stop with ctx.
func NewResourceQuota(ctx context.Context, client kubernetes.Interface, f informers.SharedInformerFactory) (*ResourceQuota, error) {
	p, err := resourcequota.NewResourceQuota(&resourcequotaapi.Configuration{}, evaluatorWorkers)
	if err != nil {
		return nil, err
	}
	p.SetDrainedNotification(ctx.Done())
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(freshQuotas{SharedInformerFactory: f, client: client})
	cfg, err := Configuration(nil)
	if err != nil {
		return nil, err
	}
	p.SetQuotaConfiguration(cfg)
	if err := p.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("resource quota admission: %w", err)
	}
	return &ResourceQuota{plugin: p}, nil
}

// Validate implements apiserver.Validator.
func (q *ResourceQuota) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if req.Namespace == "" {
		return nil, nil
	}
	return nil, q.plugin.Validate(ctx, attributes(req, req.Object, req.OldObject), nil)
}

// LimitRanger is the LimitRanger admission plugin: as a Mutator it gives a created pod's
// containers the default requests and limits of the namespace's LimitRanges, as a
// Validator it refuses pods and PersistentVolumeClaims outside their min, max and
// maxLimitRequestRatio, with upstream's 403.
type LimitRanger struct {
	plugin *limitranger.LimitRanger
}

var (
	_ apiserver.Mutator   = (*LimitRanger)(nil)
	_ apiserver.Validator = (*LimitRanger)(nil)
)

// NewLimitRanger builds the plugin over client (live lookups while the cache is empty)
// and the LimitRange informer of f; the caller starts f.
func NewLimitRanger(client kubernetes.Interface, f informers.SharedInformerFactory) (*LimitRanger, error) {
	p, err := limitranger.NewLimitRanger(&limitranger.DefaultLimitRangerActions{})
	if err != nil {
		return nil, err
	}
	p.SetExternalKubeClientSet(client)
	p.SetExternalKubeInformerFactory(f)
	if err := p.ValidateInitialization(); err != nil {
		return nil, fmt.Errorf("limit ranger admission: %w", err)
	}
	return &LimitRanger{plugin: p}, nil
}

// limited reports whether the LimitRanger looks at req at all (pods and claims).
func limited(req *apiserver.AdmissionRequest) bool {
	return req.Namespace != "" && req.Resource.Group == "" &&
		(req.Resource.Resource == "pods" || req.Resource.Resource == "persistentvolumeclaims")
}

// Mutate implements apiserver.Mutator: the plugin's defaulting, on the internal copy of
// the object, copied back only when it changed something.
//
// A created pod's containers first get requests from their limits where they have none:
// that is core/v1's pod defaulting, which kube-apiserver applies before admission and
// tranche's strategy only after the Mutators, and the LimitRanger's defaults depend on
// it (a container with a limit and no request is given the limit, not defaultRequest).
func (l *LimitRanger) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	if !limited(req) {
		return nil
	}
	if pod, ok := req.Object.(*v1.Pod); ok && req.Operation == apiserver.AdmitCreate && req.Subresource == "" {
		DefaultRequestsFromLimits(pod)
	}
	obj, old, err := internalObjects(req)
	if err != nil {
		return err
	}
	before := obj.DeepCopyObject()
	if err := l.plugin.Admit(ctx, attributes(req, obj, old), nil); err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(before, obj) {
		return nil
	}
	if err := legacyscheme.Scheme.Convert(obj, req.Object, nil); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("converting %s back: %w", req.Kind.Kind, err))
	}
	return nil
}

// Validate implements apiserver.Validator: the plugin's min, max and ratio checks.
func (l *LimitRanger) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if !limited(req) {
		return nil, nil
	}
	obj, old, err := internalObjects(req)
	if err != nil {
		return nil, err
	}
	return nil, l.plugin.Validate(ctx, attributes(req, obj, old), nil)
}

// internalObjects converts the request's objects to the internal types the LimitRanger
// works on.
func internalObjects(req *apiserver.AdmissionRequest) (obj, old runtime.Object, err error) {
	obj, err = toInternal(req.Object)
	if err != nil {
		return nil, nil, err
	}
	if req.OldObject != nil {
		if old, err = toInternal(req.OldObject); err != nil {
			return nil, nil, err
		}
	}
	return obj, old, nil
}

func toInternal(in runtime.Object) (runtime.Object, error) {
	var out runtime.Object
	switch in.(type) {
	case *v1.Pod:
		out = &api.Pod{}
	case *v1.PersistentVolumeClaim:
		out = &api.PersistentVolumeClaim{}
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected object %T", in))
	}
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("converting %T: %w", in, err))
	}
	return out, nil
}

// attributes describes req to an upstream admission plugin, with obj and old as its
// objects.
func attributes(req *apiserver.AdmissionRequest, obj, old runtime.Object) admission.Attributes {
	op := admission.Create
	if req.Operation == apiserver.AdmitUpdate {
		op = admission.Update
	}
	return admission.NewAttributesRecord(obj, old, req.Kind, req.Namespace, req.Name, req.Resource, req.Subresource, op, nil, req.DryRun, nil)
}

// DefaultRequestsFromLimits sets each container's and init container's missing requests
// to its limits, as core/v1's SetDefaults_Pod does.
func DefaultRequestsFromLimits(pod *v1.Pod) {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			if r.Limits == nil {
				continue
			}
			if r.Requests == nil {
				r.Requests = v1.ResourceList{}
			}
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
}
