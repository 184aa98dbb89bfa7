package admission

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	mutatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/featuregate"
	"k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/clusterdial"
)

// Webhooks is an apiserver.Mutator (MutatingAdmissionPolicies, then mutating webhooks)
// and an apiserver.Validator (ValidatingAdmissionPolicies, then validating webhooks), as
// kube-apiserver orders its plugins. Until Start has run it admits everything: the API
// server must serve its own loopback client before the configurations can be watched.
type Webhooks struct {
	// User returns the requester of the request ctx belongs to (nil when anonymous).
	User func(ctx context.Context) user.Info
	// ClusterDial reaches cluster addresses (pods) from the cluster network; nil dials
	// directly, which only tests reaching loopback webhooks may do.
	ClusterDial clusterdial.DialFunc

	plugins atomic.Pointer[plugins]
}

type plugins struct {
	mutating   *mutating.Plugin
	validating *validating.Plugin
	policies   *validatingpolicy.Plugin
	mutations  *mutatingpolicy.Plugin
	clients    Clients
}

// Clients are what Start watches and reads with.
type Clients struct {
	Kube kubernetes.Interface
	// Dynamic and RESTMapper read a policy's params (paramKind may be any resource).
	Dynamic    dynamic.Interface
	RESTMapper meta.RESTMapper
	// Authorizer answers policies' authorizer checks (CEL's authorizer variable).
	Authorizer authorizer.UnconditionalAuthorizer
}

var (
	_ apiserver.Mutator         = (*Webhooks)(nil)
	_ apiserver.Validator       = (*Webhooks)(nil)
	_ apiserver.WarningMutator  = (*Webhooks)(nil)
	_ apiserver.OperationFilter = (*Webhooks)(nil)
)

// objectInterfaces are client-go's scheme, whose typed objects are the served ones:
// a webhook matching the served version converts nothing, and a mutated object is
// copied back into the request's (see sameTypeConvertor).
var objectInterfaces = &admission.RuntimeObjectInterfaces{
	ObjectCreater:            scheme.Scheme,
	ObjectTyper:              scheme.Scheme,
	ObjectDefaulter:          scheme.Scheme,
	ObjectConvertor:          sameTypeConvertor{scheme.Scheme},
	EquivalentResourceMapper: runtime.NewEquivalentResourceRegistry(),
}

// Start builds the webhook and policy plugins over informers of c.Kube, waits for their
// caches and turns them on. Configuration changes reach the plugins through the
// informers' watches, so they apply as soon as the API server has stored them.
func (w *Webhooks) Start(ctx context.Context, c Clients) error {
	client := c.Kube
	factory := informers.NewSharedInformerFactory(client, 0)
	resolver, _, err := clusterdial.NewEndpointResolver(factory)
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	m, err := mutating.NewMutatingWebhook(nil)
	if err != nil {
		return fmt.Errorf("mutating webhooks: %w", err)
	}
	v, err := validating.NewValidatingAdmissionWebhook(nil)
	if err != nil {
		return fmt.Errorf("validating webhooks: %w", err)
	}
	wrap := clusterdial.Wrapper(w.ClusterDial)
	for _, p := range []interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetAuthenticationInfoResolverWrapper(webhookutil.AuthenticationInfoResolverWrapper)
		SetServiceResolver(webhookutil.ServiceResolver)
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
		SetExcludedAdmissionResources([]schema.GroupResource)
		InspectFeatureGates(featuregate.FeatureGate)
		ValidateInitialization() error
	}{m, v} {
		// Reviews (tokenreviews, subjectaccessreviews, ...) never reach webhooks, as
		// kube-apiserver excludes them (ExcludeAdmissionWebhookVirtualResources).
		p.SetExcludedAdmissionResources(exclusion.Excluded())
		p.InspectFeatureGates(utilfeature.DefaultFeatureGate)
		p.SetExternalKubeClientSet(client)
		p.SetExternalKubeInformerFactory(factory)
		p.SetAuthenticationInfoResolverWrapper(wrap)
		p.SetServiceResolver(resolver)
		p.SetUnconditionalAuthorizer(c.Authorizer) // matchConditions' authorizer checks
		if err := p.ValidateInitialization(); err != nil {
			return err
		}
	}
	vap, err := validatingpolicy.NewPlugin(nil)
	if err != nil {
		return fmt.Errorf("validating admission policies: %w", err)
	}
	mutatingPolicies, err := mutatingpolicy.NewPlugin(nil)
	if err != nil {
		return fmt.Errorf("mutating admission policies: %w", err)
	}
	mutatingPolicies.SetEnabled(true) // GA and on by default since Kubernetes 1.36
	for _, p := range []interface {
		SetExternalKubeClientSet(kubernetes.Interface)
		SetExternalKubeInformerFactory(informers.SharedInformerFactory)
		SetDynamicClient(dynamic.Interface)
		SetRESTMapper(meta.RESTMapper)
		SetUnconditionalAuthorizer(authorizer.UnconditionalAuthorizer)
		SetDrainedNotification(<-chan struct{})
		SetExcludedAdmissionResources([]schema.GroupResource)
		ValidateInitialization() error
	}{vap, mutatingPolicies} {
		p.SetExcludedAdmissionResources(exclusion.Excluded())
		p.SetExternalKubeClientSet(client)
		p.SetExternalKubeInformerFactory(factory)
		p.SetDynamicClient(c.Dynamic)
		p.SetRESTMapper(c.RESTMapper)
		p.SetUnconditionalAuthorizer(c.Authorizer)
		p.SetDrainedNotification(ctx.Done())
		if err := p.ValidateInitialization(); err != nil {
			return fmt.Errorf("admission policies: %w", err)
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("admission webhooks: cache of %v did not sync", typ)
		}
	}
	if !vap.WaitForReady() || !mutatingPolicies.WaitForReady() {
		return errors.New("admission policies: their caches did not sync")
	}
	w.plugins.Store(&plugins{mutating: m, validating: v, policies: vap, mutations: mutatingPolicies, clients: c})
	return nil
}

// HandlesOperation implements apiserver.OperationFilter: webhooks and policies see
// deletes and connects as well.
func (w *Webhooks) HandlesOperation(op apiserver.AdmitOp) bool {
	return op == apiserver.AdmitDelete || op == apiserver.AdmitConnect
}

// Mutate implements apiserver.Mutator with MutateWithWarnings, dropping the warnings.
func (w *Webhooks) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	_, err := w.MutateWithWarnings(ctx, req)
	return err
}

// MutateWithWarnings implements apiserver.WarningMutator: MutatingAdmissionPolicies,
// then the mutating webhooks, whose patches change req.Object; the webhooks' warnings
// are returned for the client.
func (w *Webhooks) MutateWithWarnings(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	p := w.plugins.Load()
	if p == nil {
		return nil, nil
	}
	attr, restore := w.attributes(ctx, req)
	defer restore()
	rec := &warnings{}
	ctx = warning.WithWarningRecorder(ctx, rec)
	admit := func() error {
		if err := p.mutations.Admit(ctx, attr, objectInterfaces); err != nil {
			return err
		}
		return p.mutating.Admit(ctx, attr, objectInterfaces)
	}
	if err := admit(); err != nil {
		return rec.list, err
	}
	// reinvocationPolicy IfNeeded: a policy or webhook that asked to see later changes
	// runs once more, as kube-apiserver's admission chain reinvokes its plugins.
	if rc := attr.GetReinvocationContext(); rc.ShouldReinvoke() {
		rc.SetIsReinvoke()
		err := admit()
		return rec.list, err
	}
	return rec.list, nil
}

// Validate implements apiserver.Validator: the validating webhooks, called in parallel;
// their warnings are returned for the client.
func (w *Webhooks) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	p := w.plugins.Load()
	if p == nil {
		return nil, nil
	}
	attr, restore := w.attributes(ctx, req)
	defer restore()
	if err := authorizeParamKind(ctx, req, attr.GetUserInfo(), p.clients.RESTMapper, p.clients.Authorizer); err != nil {
		return nil, err
	}
	rec := &warnings{}
	ctx = warning.WithWarningRecorder(ctx, rec)
	if err := p.policies.Validate(ctx, attr, objectInterfaces); err != nil {
		return rec.list, err
	}
	err := p.validating.Validate(ctx, attr, objectInterfaces)
	return rec.list, err
}

// attributes describes req as k8s.io/apiserver's admission attributes. The objects get
// their apiVersion and kind for the webhook (as decoded requests carry them);
// restore puts back what they had.
func (w *Webhooks) attributes(ctx context.Context, req *apiserver.AdmissionRequest) (admission.Attributes, func()) {
	var restores []func()
	for _, obj := range []runtime.Object{req.Object, req.OldObject} {
		if obj == nil || reflect.ValueOf(obj).IsNil() {
			continue
		}
		kind := obj.GetObjectKind()
		was := kind.GroupVersionKind()
		kind.SetGroupVersionKind(req.Kind)
		restores = append(restores, func() { kind.SetGroupVersionKind(was) })
	}
	// The options carry their kind as decoded ones do: webhooks see it in request.options.
	optionsMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{Kind: kind, APIVersion: metav1.SchemeGroupVersion.String()}
	}
	var dryRun []string
	if req.DryRun {
		dryRun = []string{metav1.DryRunAll}
	}
	var op admission.Operation
	var opts runtime.Object
	switch req.Operation {
	case apiserver.AdmitCreate:
		op, opts = admission.Create, &metav1.CreateOptions{TypeMeta: optionsMeta("CreateOptions"), DryRun: dryRun}
	case apiserver.AdmitUpdate:
		op, opts = admission.Update, &metav1.UpdateOptions{TypeMeta: optionsMeta("UpdateOptions"), DryRun: dryRun}
	case apiserver.AdmitDelete:
		del := &metav1.DeleteOptions{}
		if o, ok := req.Options.(*metav1.DeleteOptions); ok && o != nil {
			del = o.DeepCopy()
		}
		del.TypeMeta = optionsMeta("DeleteOptions")
		op, opts = admission.Delete, del
	default:
		op = admission.Connect
	}
	var u user.Info
	if w.User != nil {
		u = w.User(ctx)
	}
	if u == nil {
		u = &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	}
	var old runtime.Object
	if req.OldObject != nil && !reflect.ValueOf(req.OldObject).IsNil() {
		old = req.OldObject
	}
	var obj runtime.Object
	if req.Object != nil && !reflect.ValueOf(req.Object).IsNil() {
		obj = req.Object
	}
	attr := admission.NewAttributesRecord(obj, old, req.Kind, req.Namespace, req.Name, req.Resource,
		req.Subresource, op, opts, req.DryRun, u)
	return attr, func() {
		for _, r := range restores {
			r()
		}
	}
}

// warnings collects the warnings webhooks send.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (r *warnings) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, text)
}

// sameTypeConvertor copies between two objects of the same Go type (the served version
// on both sides) and leaves other conversions to the scheme.
type sameTypeConvertor struct{ runtime.ObjectConvertor }

func (c sameTypeConvertor) Convert(in, out, context interface{}) error {
	vin, vout := reflect.ValueOf(in), reflect.ValueOf(out)
	if vin.Type() == vout.Type() && vin.Kind() == reflect.Pointer {
		vout.Elem().Set(vin.Elem())
		return nil
	}
	return c.ObjectConvertor.Convert(in, out, context)
}
