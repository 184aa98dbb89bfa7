package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apiextlisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/clusterdial"
	"github.com/tranche/tranche/internal/registry"
	regext "github.com/tranche/tranche/internal/registry/apiextensions"
)

// Server is the API server the controller adds resources to.
type Server interface {
	SetResources(owner string, res []registry.Resource, opts apiserver.DynamicOptions) error
	RemoveResources(owner string)
	RefuseCreates(owner, why string)
}

// Controller keeps one API server's custom resources in step with the
// CustomResourceDefinitions in storage, and writes their status as kube-apiserver's
// naming, establishing and finalizer controllers do. Every API server runs one: each
// learns definitions through a watch (so those another server created are served too),
// and their status writes agree (the same pure computation, optimistic concurrency).
type Controller struct {
	srv    Server
	client apiextclient.Interface
	dyn    dynamic.Interface
	log    *slog.Logger
	now    func() time.Time

	lister apiextlisters.CustomResourceDefinitionLister
	queue  workqueue.TypedRateLimitingInterface[string]
	// served is what each definition's served resources were built from, defs the
	// definitions served (worker only).
	served map[string]string
	defs   map[string]*apiextv1.CustomResourceDefinition
	// openapi publishes the served definitions' schemas (nil: not published).
	openapi *OpenAPI

	// Dial reaches cluster addresses (conversion webhooks' pods); set before Start.
	// Nil dials directly, which only tests reaching loopback webhooks may do.
	Dial clusterdial.DialFunc
	cfg  *rest.Config
	// conv builds the definitions' webhook conversions (Start makes it).
	conv *converters
}

// New returns a controller for srv whose clients use cfg (the server's loopback); it
// publishes the served schemas in openapi when not nil.
func New(srv Server, cfg *rest.Config, openapi *OpenAPI, log *slog.Logger) (*Controller, error) {
	client, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Controller{srv: srv, client: client, dyn: dyn, log: log, now: time.Now, openapi: openapi, cfg: cfg,
		served: map[string]string{}, defs: map[string]*apiextv1.CustomResourceDefinition{}}, nil
}

// Start watches the definitions, serves those already established before it returns
// (so that a restarted server serves its custom resources once ready), and keeps
// working until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	conv, err := newConverters(ctx, c.cfg, c.Dial)
	if err != nil {
		return err
	}
	c.conv = conv
	factory := apiextinformers.NewSharedInformerFactory(c.client, 0)
	inf := factory.Apiextensions().V1().CustomResourceDefinitions()
	c.lister = inf.Lister()
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "customresourcedefinitions"})
	enqueue := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		crd, ok := obj.(*apiextv1.CustomResourceDefinition)
		if !ok {
			return
		}
		c.queue.Add(crd.Name)
		// A definition's names are judged against the others of its group: they
		// may be accepted now.
		if all, err := c.lister.List(labels.Everything()); err == nil {
			for _, o := range all {
				if o.Spec.Group == crd.Spec.Group && o.Name != crd.Name {
					c.queue.Add(o.Name)
				}
			}
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("customresourcedefinitions: cache not synced")
	}
	all, err := c.lister.List(labels.Everything())
	if err != nil {
		return err
	}
	for _, crd := range all {
		if isTrue(crd, apiextv1.Established) {
			c.serve(crd)
		}
	}
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	go c.run(ctx)
	return nil
}

func (c *Controller) run(ctx context.Context) {
	for {
		name, quit := c.queue.Get()
		if quit {
			return
		}
		after, err := c.sync(ctx, name)
		switch {
		case err != nil:
			c.log.Warn("customresourcedefinition sync", "crd", name, "err", err)
			c.queue.AddRateLimited(name)
		case after > 0:
			c.queue.Forget(name)
			c.queue.AddAfter(name, after)
		default:
			c.queue.Forget(name)
		}
		c.queue.Done(name)
	}
}

// sync brings one definition's status and served resources up to date; a positive
// duration asks to be called again after it (custom resources still being deleted).
func (c *Controller) sync(ctx context.Context, name string) (time.Duration, error) {
	cached, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		c.unserve(name)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	crd := cached.DeepCopy()
	if crd.DeletionTimestamp != nil && hasFinalizer(crd, regext.CleanupFinalizer) {
		// Serve the objects while they are deleted (as Terminating: no creates).
		if isTrue(crd, apiextv1.Established) {
			c.serve(crd)
		}
		return c.finalize(ctx, crd)
	}
	c.setNames(crd)
	crds := c.client.ApiextensionsV1().CustomResourceDefinitions()
	if !equalStatus(&crd.Status, &cached.Status) {
		updated, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			// The informer brings the newer object and another sync.
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		crd = updated
	}
	if !isTrue(crd, apiextv1.Established) && !isTrue(crd, apiextv1.NamesAccepted) {
		c.unserve(name)
		return 0, nil
	}
	// Served once the names are accepted, before Established is written (upstream's
	// establishing controller): a client that saw the condition finds the resource.
	c.serve(crd)
	if !isTrue(crd, apiextv1.Established) {
		regext.SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Established, Status: apiextv1.ConditionTrue,
			Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"}, c.now())
		_, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return 0, err
		}
	}
	return 0, nil
}

// serve (re)builds crd's resources when what they depend on changed.
func (c *Controller) serve(crd *apiextv1.CustomResourceDefinition) {
	key := servingKey(crd)
	if c.served[crd.Name] == key {
		c.refuseWhileTerminating(crd)
		return
	}
	res, opts, err := Resources(crd)
	if err == nil {
		opts.Convert, err = c.conv.convertFunc(crd)
	}
	if err == nil {
		err = c.srv.SetResources(crd.Name, res, opts)
	}
	if err != nil {
		c.log.Error("serving custom resources", "crd", crd.Name, "err", err)
		return
	}
	c.served[crd.Name] = key
	c.defs[crd.Name] = crd.DeepCopy()
	c.refuseWhileTerminating(crd)
	c.publish()
	c.log.Info("serving custom resources", "crd", crd.Name, "versions", len(res))
}

// unserve stops serving name's resources.
func (c *Controller) unserve(name string) {
	if _, ok := c.served[name]; !ok {
		return
	}
	c.srv.RemoveResources(name)
	delete(c.served, name)
	delete(c.defs, name)
	c.publish()
}

// publish gives the OpenAPI documents the schemas of the served definitions.
func (c *Controller) publish() {
	if c.openapi == nil {
		return
	}
	defs := make([]*apiextv1.CustomResourceDefinition, 0, len(c.defs))
	for _, d := range c.defs {
		defs = append(defs, d)
	}
	if err := c.openapi.update(defs); err != nil {
		c.log.Error("publishing custom resources' OpenAPI", "err", err)
	}
}

// refuseWhileTerminating refuses creates of crd's resources while it is being deleted,
// with upstream's message.
func (c *Controller) refuseWhileTerminating(crd *apiextv1.CustomResourceDefinition) {
	why := ""
	if isTrue(crd, apiextv1.Terminating) {
		why = "create not allowed while custom resource definition is terminating"
	}
	c.srv.RefuseCreates(crd.Name, why)
}

// servingKey summarises what the served resources are built from (spec and accepted
// names, as upstream), so that status writes changing neither (conditions, the
// deletion's) do not rebuild them and end their watches.
func servingKey(crd *apiextv1.CustomResourceDefinition) string {
	data, _ := json.Marshal(struct {
		Spec  apiextv1.CustomResourceDefinitionSpec
		Names apiextv1.CustomResourceDefinitionNames
	}{crd.Spec, crd.Status.AcceptedNames})
	return string(data)
}

// setNames computes acceptedNames and the NamesAccepted and Established conditions as
// upstream's naming controller does: a name another definition of the group already
// accepted is refused; a definition whose names are all accepted and that is not yet
// established is Installing (sync establishes it once served).
func (c *Controller) setNames(crd *apiextv1.CustomResourceDefinition) {
	resources, kinds := sets.New[string](), sets.New[string]()
	if all, err := c.lister.List(labels.Everything()); err == nil {
		for _, o := range all {
			if o.Spec.Group != crd.Spec.Group || o.Name == crd.Name {
				continue
			}
			n := o.Status.AcceptedNames
			resources.Insert(n.Plural, n.Singular)
			resources.Insert(n.ShortNames...)
			kinds.Insert(n.Kind, n.ListKind)
		}
	}
	names, accepted := acceptNames(crd.Spec.Names, crd.Status.AcceptedNames, resources, kinds)
	crd.Status.AcceptedNames = names
	now := c.now()
	regext.SetCondition(crd, accepted, now)
	established := regext.FindCondition(crd, apiextv1.Established)
	switch {
	case established != nil && established.Status == apiextv1.ConditionTrue:
	case accepted.Status == apiextv1.ConditionTrue:
		regext.SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Established, Status: apiextv1.ConditionFalse,
			Reason: "Installing", Message: "the initial names have been accepted"}, now)
	default:
		regext.SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Established, Status: apiextv1.ConditionFalse,
			Reason: "NotAccepted", Message: "not all names are accepted"}, now)
	}
}

// acceptNames is the naming controller's judgement: the names requested that are
// either already this definition's or free in the group, and the NamesAccepted
// condition (the last conflict found names its reason).
func acceptNames(requested, accepted apiextv1.CustomResourceDefinitionNames, resources, kinds sets.Set[string]) (apiextv1.CustomResourceDefinitionNames, apiextv1.CustomResourceDefinitionCondition) {
	cond := apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.NamesAccepted, Status: apiextv1.ConditionTrue,
		Reason: "NoConflicts", Message: "no conflicts found"}
	conflict := func(reason string, err error) {
		cond.Status, cond.Reason, cond.Message = apiextv1.ConditionFalse, reason, err.Error()
	}
	out := accepted
	if err := freeOrOwn(requested.Plural, accepted.Plural, resources); err != nil {
		conflict("PluralConflict", err)
	} else {
		out.Plural = requested.Plural
	}
	if err := freeOrOwn(requested.Singular, accepted.Singular, resources); err != nil {
		conflict("SingularConflict", err)
	} else {
		out.Singular = requested.Singular
	}
	if !reflect.DeepEqual(requested.ShortNames, accepted.ShortNames) {
		own := sets.New(accepted.ShortNames...)
		var errs []error
		for _, s := range requested.ShortNames {
			if own.Has(s) {
				continue
			}
			if err := freeOrOwn(s, "", resources); err != nil {
				errs = append(errs, err)
			}
		}
		if err := utilerrors.NewAggregate(errs); err != nil {
			conflict("ShortNamesConflict", err)
		} else {
			out.ShortNames = requested.ShortNames
		}
	}
	if err := freeOrOwn(requested.Kind, accepted.Kind, kinds); err != nil {
		conflict("KindConflict", err)
	} else {
		out.Kind = requested.Kind
	}
	if err := freeOrOwn(requested.ListKind, accepted.ListKind, kinds); err != nil {
		conflict("ListKindConflict", err)
	} else {
		out.ListKind = requested.ListKind
	}
	out.Categories = requested.Categories
	return out, cond
}

func freeOrOwn(requested, accepted string, used sets.Set[string]) error {
	if requested == accepted || !used.Has(requested) {
		return nil
	}
	return fmt.Errorf("%q is already in use", requested)
}

// finalize deletes crd's custom resources and then removes the cleanup finalizer, with
// the Terminating condition upstream's finalizer controller writes at each step.
func (c *Controller) finalize(ctx context.Context, crd *apiextv1.CustomResourceDefinition) (time.Duration, error) {
	crds := c.client.ApiextensionsV1().CustomResourceDefinitions()
	if cond := regext.FindCondition(crd, apiextv1.Terminating); cond == nil || cond.Reason != "InstanceDeletionInProgress" {
		regext.SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue,
			Reason: "InstanceDeletionInProgress", Message: "CustomResource deletion is in progress"}, c.now())
		updated, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		crd = updated
	}
	final := apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionFalse,
		Reason: "NeverEstablished", Message: "resource was never established"}
	if isTrue(crd, apiextv1.Established) {
		remaining, err := c.deleteInstances(ctx, crd)
		if err != nil {
			regext.SetCondition(crd, apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue,
				Reason: "InstanceDeletionFailed", Message: fmt.Sprintf("could not issue all deletes: %v", err)}, c.now())
			_, _ = crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
			return 0, err
		}
		if remaining > 0 {
			// Objects with finalizers of their own are gone when those are.
			return time.Second, nil
		}
		final = apiextv1.CustomResourceDefinitionCondition{Type: apiextv1.Terminating, Status: apiextv1.ConditionFalse,
			Reason: "InstanceDeletionCompleted", Message: "removed all instances"}
	}
	regext.SetCondition(crd, final, c.now())
	updated, err := crds.UpdateStatus(ctx, crd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	fs := updated.Finalizers[:0:0]
	for _, f := range updated.Finalizers {
		if f != regext.CleanupFinalizer {
			fs = append(fs, f)
		}
	}
	updated.Finalizers = fs
	_, err = crds.Update(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return 0, nil
	}
	return 0, err
}

// deleteInstances asks for the deletion of every custom resource of crd, a collection
// per namespace, and returns how many are left.
func (c *Controller) deleteInstances(ctx context.Context, crd *apiextv1.CustomResourceDefinition) (int, error) {
	version := ""
	for _, v := range crd.Spec.Versions {
		if v.Served {
			version = v.Name
			break
		}
	}
	if version == "" {
		return 0, nil
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Status.AcceptedNames.Plural}
	list, err := c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("could not list instances: %w", err)
	}
	done := sets.New[string]()
	for _, item := range list.Items {
		ns := item.GetNamespace()
		if done.Has(ns) || item.GetDeletionTimestamp() != nil {
			continue
		}
		done.Insert(ns)
		var err error
		if ns == "" {
			err = c.dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		} else {
			err = c.dyn.Resource(gvr).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
	}
	if len(done) == 0 {
		return len(list.Items), nil
	}
	list, err = c.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("could not confirm zero CustomResources remaining: %w", err)
	}
	return len(list.Items), nil
}

func hasFinalizer(crd *apiextv1.CustomResourceDefinition, f string) bool {
	for _, x := range crd.Finalizers {
		if x == f {
			return true
		}
	}
	return false
}

func equalStatus(a, b *apiextv1.CustomResourceDefinitionStatus) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
