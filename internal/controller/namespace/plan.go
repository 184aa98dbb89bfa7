package namespace

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// finalizerToken is the spec finalizer this controller owns; the server
// keeps a terminating namespace until it is gone from spec.finalizers.
const finalizerToken v1.FinalizerName = v1.FinalizerKubernetes

// conditionTypes lists, in the order Kubernetes writes them, the namespace
// conditions this controller maintains.
var conditionTypes = []v1.NamespaceConditionType{
	v1.NamespaceDeletionDiscoveryFailure,
	v1.NamespaceDeletionGVParsingFailure,
	v1.NamespaceDeletionContentFailure,
	v1.NamespaceContentRemaining,
	v1.NamespaceFinalizersRemaining,
}

// okConditions are the False variants written when an attempt produced no
// failure of that type, with Kubernetes' reasons and messages.
var okConditions = map[v1.NamespaceConditionType]struct{ reason, message string }{
	v1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	v1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	v1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	v1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	v1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// deletion is what one attempt at emptying a namespace observed.
type deletion struct {
	// discoveryErr is a (possibly partial) discovery failure.
	discoveryErr error
	// groupVersionErr is a failure to parse a discovered group/version.
	groupVersionErr error
	// contentErrs are per-resource failures to delete or to list.
	contentErrs []error
	// remaining counts the objects still present per resource.
	remaining map[schema.GroupVersionResource]int
	// finalizers counts the remaining objects per finalizer they carry.
	finalizers map[string]int
	// estimate is how many seconds the remaining content may still need
	// (graceful pod termination, finalizers); zero means nothing to wait for.
	estimate int64
	// podsRemain reports that pods remain, so nothing else was deleted yet
	// (ordered namespace deletion). Kubernetes then writes the conditions of the
	// failures seen so far only: ContentRemaining and FinalizersRemaining read
	// False until the pods are gone and the rest has been tried.
	podsRemain bool
}

// action is what sync must do for a terminating namespace.
type action struct {
	// status, when not nil, is the namespace with updated conditions to
	// write through UpdateStatus.
	status *v1.Namespace
	// finalize reports that the namespace is empty and still carries our
	// spec finalizer: remove it through the finalize subresource.
	finalize bool
	// wait reports content that is still going away: look again later.
	wait bool
	// err aggregates the failures of the attempt: retry with backoff.
	err error
}

// plan decides, from one deletion attempt on ns, which conditions to
// write, whether the namespace can be finalized and whether to come back.
// It follows Kubernetes: failures block finalization, remaining content
// makes the controller wait, and conditions are rewritten only on change
// (LastTransitionTime moves only when a status flips).
func plan(ns *v1.Namespace, remaining map[schema.GroupVersionResource]int, d deletion, now metav1.Time) action {
	var act action
	updated := ns.DeepCopy()
	if updateConditions(&updated.Status, failureConditions(remaining, d, now), now) {
		act.status = updated
	}
	errs := make([]error, 0, 2+len(d.contentErrs))
	for _, err := range []error{d.discoveryErr, d.groupVersionErr} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, d.contentErrs...)
	if len(errs) > 0 {
		act.err = errors.Join(errs...)
		return act
	}
	if d.estimate > 0 || hasRemaining(remaining) {
		act.wait = true
		return act
	}
	if hasFinalizer(ns, finalizerToken) {
		act.finalize = true
	}
	return act
}

// failureConditions builds the True conditions an attempt produced, in
// Kubernetes' wording.
func failureConditions(remaining map[schema.GroupVersionResource]int, d deletion, now metav1.Time) []v1.NamespaceCondition {
	var conds []v1.NamespaceCondition
	add := func(t v1.NamespaceConditionType, reason, message string) {
		conds = append(conds, v1.NamespaceCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: now, Reason: reason, Message: message})
	}
	if d.discoveryErr != nil {
		msg := d.discoveryErr.Error()
		var groupErr *discovery.ErrGroupDiscoveryFailed
		if errors.As(d.discoveryErr, &groupErr) {
			msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(groupErr.Groups), d.discoveryErr)
		}
		add(v1.NamespaceDeletionDiscoveryFailure, "DiscoveryFailed", msg)
	}
	if d.groupVersionErr != nil {
		add(v1.NamespaceDeletionGVParsingFailure, "GroupVersionParsingFailed", d.groupVersionErr.Error())
	}
	if len(d.contentErrs) > 0 {
		msgs := make([]string, 0, len(d.contentErrs))
		for _, err := range d.contentErrs {
			msgs = append(msgs, err.Error())
		}
		sort.Strings(msgs)
		add(v1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	if len(remaining) > 0 && !d.podsRemain {
		var parts []string
		for gvr, n := range remaining {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
			}
		}
		sort.Strings(parts)
		add(v1.NamespaceContentRemaining, "SomeResourcesRemain", "Some resources are remaining: "+strings.Join(parts, ", "))
	}
	if len(d.finalizers) > 0 && !d.podsRemain {
		var parts []string
		for f, n := range d.finalizers {
			if n > 0 {
				parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
			}
		}
		sort.Strings(parts)
		add(v1.NamespaceFinalizersRemaining, "SomeFinalizersRemain",
			"Some content in the namespace has finalizers remaining: "+strings.Join(parts, ", "))
	}
	return conds
}

// updateConditions merges the failures of this attempt into status: every
// maintained type without a failure gets its False variant. It reports
// whether anything changed.
func updateConditions(status *v1.NamespaceStatus, failures []v1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, t := range conditionTypes {
		want := findCondition(failures, t)
		if want == nil {
			ok := okConditions[t]
			want = &v1.NamespaceCondition{Type: t, Status: v1.ConditionFalse, LastTransitionTime: now, Reason: ok.reason, Message: ok.message}
		}
		have := findCondition(status.Conditions, t)
		switch {
		case have == nil:
			status.Conditions = append(status.Conditions, *want)
			changed = true
		case have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message:
			if have.Status != want.Status {
				have.LastTransitionTime = now
			}
			have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

func findCondition(conds []v1.NamespaceCondition, t v1.NamespaceConditionType) *v1.NamespaceCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func hasRemaining(remaining map[schema.GroupVersionResource]int) bool {
	for _, n := range remaining {
		if n > 0 {
			return true
		}
	}
	return false
}

func hasFinalizer(ns *v1.Namespace, token v1.FinalizerName) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == token {
			return true
		}
	}
	return false
}

// withoutFinalizer returns a copy of ns whose spec.finalizers lacks token,
// the body the finalize subresource expects.
func withoutFinalizer(ns *v1.Namespace, token v1.FinalizerName) *v1.Namespace {
	out := ns.DeepCopy()
	out.Spec.Finalizers = make([]v1.FinalizerName, 0, len(ns.Spec.Finalizers))
	for _, f := range ns.Spec.Finalizers {
		if f != token {
			out.Spec.Finalizers = append(out.Spec.Finalizers, f)
		}
	}
	return out
}
