// Package flowcontrol keeps the API priority and fairness configuration as
// kube-apiserver does: the bootstrap FlowSchemas and PriorityLevelConfigurations exist
// (KeepBootstrap, upstream's APF configuration ensurer) and every FlowSchema says in its
// Dangling condition whether the priority level it names exists (the Controller,
// upstream's APF configuration controller's status writes). tranche does not queue
// requests by them.
package flowcontrol

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
	"k8s.io/client-go/kubernetes"

	registry "github.com/tranche/tranche/internal/registry/flowcontrol"
)

// KeepBootstrap makes sure the bootstrap configuration objects are present, at once and
// then every interval until ctx ends: mandatory objects always get their fixed spec back;
// suggested ones are created when missing and updated only while their
// apf.kubernetes.io/autoupdate-spec annotation is true (or, without a valid annotation,
// while their generation is 1); objects marked for auto-update that are no longer in
// the bootstrap set are deleted.
func KeepBootstrap(ctx context.Context, client kubernetes.Interface, interval time.Duration, log *slog.Logger) {
	for {
		if err := EnsureBootstrap(ctx, client); err != nil && ctx.Err() == nil {
			log.Warn("API priority and fairness bootstrap configuration", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// EnsureBootstrap runs one pass of KeepBootstrap.
func EnsureBootstrap(ctx context.Context, client kubernetes.Interface) error {
	pls := plOps{client.FlowcontrolV1().PriorityLevelConfigurations()}
	fss := fsOps{client.FlowcontrolV1().FlowSchemas()}
	var errs []error
	errs = append(errs, ensure(ctx, pls, bootstrap.MandatoryPriorityLevelConfigurations, true))
	errs = append(errs, ensure(ctx, pls, bootstrap.SuggestedPriorityLevelConfigurations, false))
	errs = append(errs, ensure(ctx, fss, bootstrap.MandatoryFlowSchemas, true))
	errs = append(errs, ensure(ctx, fss, bootstrap.SuggestedFlowSchemas, false))
	wantPL := append(slices.Clone(bootstrap.MandatoryPriorityLevelConfigurations), bootstrap.SuggestedPriorityLevelConfigurations...)
	wantFS := append(slices.Clone(bootstrap.MandatoryFlowSchemas), bootstrap.SuggestedFlowSchemas...)
	errs = append(errs, removeUnwanted(ctx, pls, wantPL), removeUnwanted(ctx, fss, wantFS))
	return errors.Join(errs...)
}

// object is what the ensurer needs of a FlowSchema or PriorityLevelConfiguration.
type object interface {
	*flowcontrolv1.FlowSchema | *flowcontrolv1.PriorityLevelConfiguration
	metav1.Object
}

// ops reads and writes one kind of configuration object.
type ops[T object] interface {
	get(ctx context.Context, name string) (T, error)
	list(ctx context.Context) ([]T, error)
	create(ctx context.Context, obj T) error
	update(ctx context.Context, obj T) error
	delete(ctx context.Context, name string) error
	// specEqual compares a bootstrap object's spec (defaulted) with a stored one's.
	specEqual(boot, cur T) bool
	// withSpec returns a copy of cur with boot's spec.
	withSpec(cur, boot T) T
	deepCopy(obj T) T
}

func ensure[T object](ctx context.Context, o ops[T], boots []T, mandatory bool) error {
	var errs []error
	for _, boot := range boots {
		cur, err := o.get(ctx, boot.GetName())
		if apierrors.IsNotFound(err) {
			if err := o.create(ctx, o.deepCopy(boot)); err != nil && !apierrors.IsAlreadyExists(err) {
				errs = append(errs, fmt.Errorf("creating %s: %w", boot.GetName(), err))
			}
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		autoUpdate := mandatory || shouldUpdateSpec(cur)
		fixAnnotation := annotationDiffers(cur, autoUpdate)
		specChanged := autoUpdate && !o.specEqual(boot, cur)
		if !fixAnnotation && !specChanged {
			continue
		}
		revised := o.deepCopy(cur)
		if specChanged {
			revised = o.withSpec(cur, boot)
		}
		if fixAnnotation {
			a := maps(revised.GetAnnotations())
			a[flowcontrolv1.AutoUpdateAnnotationKey] = strconv.FormatBool(autoUpdate)
			revised.SetAnnotations(a)
		}
		if err := o.update(ctx, revised); err != nil && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("updating %s: %w", boot.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func maps(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// shouldUpdateSpec reads the auto-update annotation; without a valid one, an object
// whose spec was never changed (generation 1) may be updated.
func shouldUpdateSpec(obj metav1.Object) bool {
	if v, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err == nil {
		return v
	}
	return obj.GetGeneration() == 1
}

func annotationDiffers(obj metav1.Object, want bool) bool {
	v, ok := obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]
	if !ok {
		return true
	}
	cur, err := strconv.ParseBool(v)
	return err != nil || cur != want
}

func removeUnwanted[T object](ctx context.Context, o ops[T], boots []T) error {
	want := map[string]bool{}
	for _, b := range boots {
		want[b.GetName()] = true
	}
	all, err := o.list(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range all {
		if want[obj.GetName()] {
			continue
		}
		// Only objects marked for auto-update are the bootstrap's; a user's stay.
		if auto, err := strconv.ParseBool(obj.GetAnnotations()[flowcontrolv1.AutoUpdateAnnotationKey]); err != nil || !auto {
			continue
		}
		if err := o.delete(ctx, obj.GetName()); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %s: %w", obj.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

type plOps struct {
	c interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*flowcontrolv1.PriorityLevelConfiguration, error)
		List(ctx context.Context, opts metav1.ListOptions) (*flowcontrolv1.PriorityLevelConfigurationList, error)
		Create(ctx context.Context, obj *flowcontrolv1.PriorityLevelConfiguration, opts metav1.CreateOptions) (*flowcontrolv1.PriorityLevelConfiguration, error)
		Update(ctx context.Context, obj *flowcontrolv1.PriorityLevelConfiguration, opts metav1.UpdateOptions) (*flowcontrolv1.PriorityLevelConfiguration, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	}
}

func (p plOps) get(ctx context.Context, name string) (*flowcontrolv1.PriorityLevelConfiguration, error) {
	return p.c.Get(ctx, name, metav1.GetOptions{})
}

func (p plOps) list(ctx context.Context) ([]*flowcontrolv1.PriorityLevelConfiguration, error) {
	l, err := p.c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*flowcontrolv1.PriorityLevelConfiguration, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (p plOps) create(ctx context.Context, obj *flowcontrolv1.PriorityLevelConfiguration) error {
	_, err := p.c.Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func (p plOps) update(ctx context.Context, obj *flowcontrolv1.PriorityLevelConfiguration) error {
	_, err := p.c.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

func (p plOps) delete(ctx context.Context, name string) error {
	return p.c.Delete(ctx, name, metav1.DeleteOptions{})
}

// specEqual compares defaulted specs; exempt's spec.exempt is the operator's to set.
func (plOps) specEqual(boot, cur *flowcontrolv1.PriorityLevelConfiguration) bool {
	want := boot.DeepCopy()
	registry.DefaultPriorityLevelConfiguration(want)
	if want.Name == flowcontrolv1.PriorityLevelConfigurationNameExempt {
		if cur.Spec.Exempt == nil {
			return false
		}
		want.Spec.Exempt = cur.Spec.Exempt.DeepCopy()
	}
	return apiequality.Semantic.DeepEqual(want.Spec, cur.Spec)
}

func (plOps) withSpec(cur, boot *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.PriorityLevelConfiguration {
	out := cur.DeepCopy()
	out.Spec = *boot.Spec.DeepCopy()
	return out
}

func (plOps) deepCopy(obj *flowcontrolv1.PriorityLevelConfiguration) *flowcontrolv1.PriorityLevelConfiguration {
	return obj.DeepCopy()
}

type fsOps struct {
	c interface {
		Get(ctx context.Context, name string, opts metav1.GetOptions) (*flowcontrolv1.FlowSchema, error)
		List(ctx context.Context, opts metav1.ListOptions) (*flowcontrolv1.FlowSchemaList, error)
		Create(ctx context.Context, obj *flowcontrolv1.FlowSchema, opts metav1.CreateOptions) (*flowcontrolv1.FlowSchema, error)
		Update(ctx context.Context, obj *flowcontrolv1.FlowSchema, opts metav1.UpdateOptions) (*flowcontrolv1.FlowSchema, error)
		Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	}
}

func (f fsOps) get(ctx context.Context, name string) (*flowcontrolv1.FlowSchema, error) {
	return f.c.Get(ctx, name, metav1.GetOptions{})
}

func (f fsOps) list(ctx context.Context) ([]*flowcontrolv1.FlowSchema, error) {
	l, err := f.c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*flowcontrolv1.FlowSchema, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
	}
	return out, nil
}

func (f fsOps) create(ctx context.Context, obj *flowcontrolv1.FlowSchema) error {
	_, err := f.c.Create(ctx, obj, metav1.CreateOptions{})
	return err
}

func (f fsOps) update(ctx context.Context, obj *flowcontrolv1.FlowSchema) error {
	_, err := f.c.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

func (f fsOps) delete(ctx context.Context, name string) error {
	return f.c.Delete(ctx, name, metav1.DeleteOptions{})
}

func (fsOps) specEqual(boot, cur *flowcontrolv1.FlowSchema) bool {
	want := boot.DeepCopy()
	registry.DefaultFlowSchema(want)
	return apiequality.Semantic.DeepEqual(want.Spec, cur.Spec)
}

func (fsOps) withSpec(cur, boot *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchema {
	out := cur.DeepCopy()
	out.Spec = *boot.Spec.DeepCopy()
	return out
}

func (fsOps) deepCopy(obj *flowcontrolv1.FlowSchema) *flowcontrolv1.FlowSchema { return obj.DeepCopy() }
