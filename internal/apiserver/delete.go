package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/storage"
)

// Finalizers the API server adds for delete propagation (the garbage collector removes them).
const (
	finalizerOrphan     = "orphan"
	finalizerForeground = "foregroundDeletion"
)

// parseDeleteOptions reads DeleteOptions from the body (if any) and the query.
func parseDeleteOptions(r *http.Request) (*metav1.DeleteOptions, bool, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, false, err
	}
	if len(body) > 0 {
		if _, err := decodeRequest(r.Header.Get("Content-Type"), body, opts, metav1.SchemeGroupVersion.WithKind("DeleteOptions"), validationIgnore); err != nil {
			return nil, false, err
		}
	}
	q := r.URL.Query()
	if g := q.Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("invalid gracePeriodSeconds %q", g))
		}
		opts.GracePeriodSeconds = &n
	}
	if p := q.Get("propagationPolicy"); p != "" {
		pp := metav1.DeletionPropagation(p)
		opts.PropagationPolicy = &pp
	}
	if o := q.Get("orphanDependents"); o != "" {
		b := isTrue(o)
		opts.OrphanDependents = &b
	}
	dry, err := isDryRun(r)
	if err != nil {
		return nil, false, err
	}
	for _, d := range opts.DryRun {
		if d != "All" {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q", d))
		}
		dry = true
	}
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
		default:
			return nil, false, apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("DeleteOptions").GroupKind(), "",
				field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), string(*opts.PropagationPolicy), []string{"Orphan", "Background", "Foreground"})})
		}
		if opts.OrphanDependents != nil {
			return nil, false, apierrors.NewBadRequest("orphanDependents and propagationPolicy cannot be both set")
		}
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, dry, nil
}

// delete handles DELETE of one object.
func (s *Server) delete(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	opts, dry, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	out, code, err := s.deleteObject(ctx, e, ri.Namespace, ri.Name, opts, dry)
	if err != nil {
		return err
	}
	writeObject(w, r, code, out)
	return nil
}

// deleteCollection handles DELETE on a collection: each matching object is deleted as
// if alone.
func (s *Server) deleteCollection(ctx context.Context, w http.ResponseWriter, r *http.Request, ri *requestInfo, e *entry) error {
	f, err := parseFilter(e.res, r.URL.Query())
	if err != nil {
		return err
	}
	opts, dry, err := parseDeleteOptions(r)
	if err != nil {
		return err
	}
	items, _, _, _, err := s.listObjects(ctx, e, ri.Namespace, f, 0, "", "", "")
	if err != nil {
		return err
	}
	for _, obj := range items {
		m, _ := meta.Accessor(obj)
		if _, _, err := s.deleteObject(ctx, e, m.GetNamespace(), m.GetName(), opts, dry); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	writeObject(w, r, http.StatusOK, successStatus())
	return nil
}

// deleteObject deletes an object, or marks it for deletion when finalizers, spec
// finalizers (namespaces) or a pod's grace period make it wait.
func (s *Server) deleteObject(ctx context.Context, e *entry, ns, name string, opts *metav1.DeleteOptions, dry bool) (runtime.Object, int, error) {
	for attempt := 0; ; attempt++ {
		current, rev, err := e.store.get(ctx, ns, name)
		if err != nil {
			return nil, 0, err
		}
		m, _ := meta.Accessor(current)
		if p := opts.Preconditions; p != nil {
			if p.UID != nil && *p.UID != m.GetUID() {
				return nil, 0, apierrors.NewConflict(e.store.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p.UID, m.GetUID()))
			}
			if p.ResourceVersion != nil && *p.ResourceVersion != m.GetResourceVersion() {
				return nil, 0, apierrors.NewConflict(e.store.gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p.ResourceVersion, m.GetResourceVersion()))
			}
		}
		if err := s.admitDelete(ctx, e, ns, name, current, opts, dry); err != nil {
			return nil, 0, err
		}
		obj := current.DeepCopyObject()
		om, _ := meta.Accessor(obj)
		grace := s.gracePeriod(e, current, opts)
		finalizers := withPropagationFinalizer(om.GetFinalizers(), opts)
		mustWait := len(finalizers) > 0 || finalizing(e, obj) || grace > 0
		if mustWait {
			changed := false
			if !equalStrings(finalizers, om.GetFinalizers()) {
				om.SetFinalizers(finalizers)
				changed = true
			}
			now := metav1.NewTime(s.now())
			if dt := om.GetDeletionTimestamp(); dt == nil {
				when := metav1.NewTime(now.Add(secondsDuration(grace)))
				om.SetDeletionTimestamp(&when)
				om.SetDeletionGracePeriodSeconds(&grace)
				if g := om.GetGeneration(); g > 0 { // deletion is a change controllers observe (rest.BeforeDelete)
					om.SetGeneration(g + 1)
				}
				changed = true
			} else if cur := om.GetDeletionGracePeriodSeconds(); grace > 0 && cur != nil && grace < *cur {
				// A shorter grace period brings the deadline forward.
				when := metav1.NewTime(now.Add(secondsDuration(grace)))
				om.SetDeletionTimestamp(&when)
				om.SetDeletionGracePeriodSeconds(&grace)
				changed = true
			}
			if d := e.res.Delete; d != nil && d.MarkDeleting != nil && d.MarkDeleting(obj) {
				changed = true
			}
			if !changed || dry {
				return obj, http.StatusOK, nil
			}
			data, err := e.store.encode(obj)
			if err != nil {
				return nil, 0, apierrors.NewInternalError(err)
			}
			newRev, err := s.cfg.Storage.Update(ctx, e.store.key(ns, name), data, rev)
			if err != nil {
				if errors.Is(err, storage.ErrConflict) && attempt < 20 {
					continue
				}
				return nil, 0, e.store.apiError(err, name)
			}
			om.SetResourceVersion(strconv.FormatInt(newRev, 10))
			s.observeWrite(e, name, obj, newRev)
			return obj, http.StatusOK, nil
		}
		if dry {
			return obj, http.StatusOK, nil
		}
		kv, err := s.cfg.Storage.Delete(ctx, e.store.key(ns, name), rev, s.releaseOps(ctx, e, current)...)
		if err != nil {
			if errors.Is(err, storage.ErrConflict) && attempt < 20 {
				continue
			}
			return nil, 0, e.store.apiError(err, name)
		}
		om.SetResourceVersion(strconv.FormatInt(kv.ModRevision, 10))
		s.observeWrite(e, name, nil, kv.ModRevision)
		return obj, http.StatusOK, nil
	}
}

// gracePeriod is the time a deletion waits for, as the resource's delete strategy
// says (pods on a node); 0 without one.
func (s *Server) gracePeriod(e *entry, obj runtime.Object, opts *metav1.DeleteOptions) int64 {
	if d := e.res.Delete; d != nil && d.GracePeriod != nil {
		return d.GracePeriod(obj, opts)
	}
	return 0
}

// finalizing reports whether an object waits for more than its metadata.finalizers
// (a namespace's spec.finalizers).
func finalizing(e *entry, obj runtime.Object) bool {
	d := e.res.Delete
	return d != nil && d.Finalizing != nil && d.Finalizing(obj)
}

// awaitsGrace reports whether an object marked for deletion still waits for its grace
// period to end (a pod its node has not stopped yet).
func awaitsGrace(e *entry, obj runtime.Object) bool {
	d := e.res.Delete
	return d != nil && d.AwaitsGrace != nil && d.AwaitsGrace(obj)
}

// withPropagationFinalizer adds the finalizer that asks the garbage collector for
// orphan or foreground deletion.
func withPropagationFinalizer(fs []string, opts *metav1.DeleteOptions) []string {
	want := ""
	switch {
	case opts.OrphanDependents != nil && *opts.OrphanDependents:
		want = finalizerOrphan
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationOrphan:
		want = finalizerOrphan
	case opts.PropagationPolicy != nil && *opts.PropagationPolicy == metav1.DeletePropagationForeground:
		want = finalizerForeground
	}
	out := make([]string, 0, len(fs)+1)
	for _, f := range fs {
		// The latest request decides between orphaning and foreground deletion.
		if (f == finalizerOrphan || f == finalizerForeground) && want != "" && f != want {
			continue
		}
		out = append(out, f)
	}
	if want != "" && !containsString(out, want) {
		out = append(out, want)
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func secondsDuration(n int64) time.Duration { return time.Duration(n) * time.Second }
