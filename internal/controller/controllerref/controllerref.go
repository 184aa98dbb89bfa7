// Package controllerref decides which pods a controller owns by the
// ControllerRef rules every workload controller follows, and sends the
// owner-reference patches that adopt orphans and release pods that stopped
// matching. It follows the semantics of kube-controller-manager's
// PodControllerRefManager: a pod controlled by another object is never
// touched; an owned pod that no longer matches is released unless the owner
// is being deleted; a matching orphan in the owner's namespace that is not
// being deleted is adopted, after one fresh read of the owner confirms it
// still exists and is not being deleted either.
package controllerref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Claims is how a list of pods splits under the ControllerRef rules.
type Claims struct {
	// Owned are pods the owner controls that still match.
	Owned []*v1.Pod
	// Adopt are matching orphans; they become owned once adopted.
	Adopt []*v1.Pod
	// Release are pods the owner controls that no longer match.
	Release []*v1.Pod
}

// Split classifies pods for owner without any I/O. match decides whether a
// pod belongs to owner (its selector and any extra filter).
func Split(owner metav1.Object, match func(*v1.Pod) bool, pods []*v1.Pod) Claims {
	var c Claims
	deleting := owner.GetDeletionTimestamp() != nil
	for _, pod := range pods {
		if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
			switch {
			case ref.UID != owner.GetUID():
			case match(pod):
				c.Owned = append(c.Owned, pod)
			case !deleting:
				c.Release = append(c.Release, pod)
			}
			continue
		}
		if deleting || !match(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		if ns := owner.GetNamespace(); ns != "" && ns != pod.Namespace {
			continue
		}
		c.Adopt = append(c.Adopt, pod)
	}
	return c
}

// PodManager claims pods for one owner. Build one per sync: the adoption
// check runs at most once per PodManager.
type PodManager struct {
	pods       corev1client.PodsGetter
	owner      metav1.Object
	kind       schema.GroupVersionKind
	selector   labels.Selector
	canAdopt   func(context.Context) error
	finalizers []string

	once        sync.Once
	canAdoptErr error
}

// NewPodManager returns a PodManager for owner of kind, whose pods match
// selector. canAdopt, when not nil, runs once before the first adoption
// (usually Recheck); finalizers are added on adoption and removed on
// release, as the Job controller does with its tracking finalizer.
func NewPodManager(pods corev1client.PodsGetter, owner metav1.Object, kind schema.GroupVersionKind, selector labels.Selector, canAdopt func(context.Context) error, finalizers ...string) *PodManager {
	return &PodManager{pods: pods, owner: owner, kind: kind, selector: selector, canAdopt: canAdopt, finalizers: finalizers}
}

// ClaimPods returns the pods the owner controls once the orphans are
// adopted and the strays released. A pod belongs to the owner when it
// matches the selector and every filter. Pods that vanished meanwhile are
// left out silently; other failures are joined into the error, and the pods
// claimed so far are returned with it.
func (m *PodManager) ClaimPods(ctx context.Context, pods []*v1.Pod, filters ...func(*v1.Pod) bool) ([]*v1.Pod, error) {
	match := func(pod *v1.Pod) bool {
		if !m.selector.Matches(labels.Set(pod.Labels)) {
			return false
		}
		for _, f := range filters {
			if !f(pod) {
				return false
			}
		}
		return true
	}
	return m.Apply(ctx, Split(m.owner, match, pods))
}

// Apply adopts c.Adopt and releases c.Release, returning c.Owned with the
// pods adopted successfully appended.
func (m *PodManager) Apply(ctx context.Context, c Claims) ([]*v1.Pod, error) {
	owned := c.Owned
	var errs []error
	for _, pod := range c.Adopt {
		err := m.AdoptPod(ctx, pod)
		switch {
		case err == nil:
			owned = append(owned, pod)
		case !apierrors.IsNotFound(err):
			errs = append(errs, err)
		}
	}
	for _, pod := range c.Release {
		if err := m.ReleasePod(ctx, pod); err != nil {
			errs = append(errs, err)
		}
	}
	return owned, errors.Join(errs...)
}

// AdoptPod makes the owner the controller of pod, provided the adoption
// check passes. The patch carries the pod's UID, so a pod recreated under
// the same name is not adopted by mistake.
func (m *PodManager) AdoptPod(ctx context.Context, pod *v1.Pod) error {
	m.once.Do(func() {
		if m.canAdopt != nil {
			m.canAdoptErr = m.canAdopt(ctx)
		}
	})
	if m.canAdoptErr != nil {
		return fmt.Errorf("can't adopt Pod %s/%s (%s): %w", pod.Namespace, pod.Name, pod.UID, m.canAdoptErr)
	}
	if err := m.patch(ctx, pod, AdoptPatch(m.owner, m.kind, pod.UID, m.finalizers...)); err != nil {
		return fmt.Errorf("adopting pod %s/%s into %s %s/%s: %w", pod.Namespace, pod.Name, m.kind.Kind, m.owner.GetNamespace(), m.owner.GetName(), err)
	}
	return nil
}

// ReleasePod removes the owner's reference from pod. A pod that is gone, or
// whose UID or owners changed so the patch is invalid, needs no release.
func (m *PodManager) ReleasePod(ctx context.Context, pod *v1.Pod) error {
	err := m.patch(ctx, pod, ReleasePatch(m.owner.GetUID(), pod.UID, m.finalizers...))
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return fmt.Errorf("releasing pod %s/%s from %s %s/%s: %w", pod.Namespace, pod.Name, m.kind.Kind, m.owner.GetNamespace(), m.owner.GetName(), err)
}

func (m *PodManager) patch(ctx context.Context, pod *v1.Pod, patch []byte) error {
	_, err := m.pods.Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	return err
}

// Recheck returns an adoption check that reads the owner afresh with get
// (an uncached read from the API server) and refuses adoption when the
// object is gone, is another object of the same name, or is being deleted:
// the informer cache may still hold an owner that no longer exists.
func Recheck(owner metav1.Object, kind string, get func(context.Context) (metav1.Object, error)) func(context.Context) error {
	return func(ctx context.Context) error {
		fresh, err := get(ctx)
		if err != nil {
			return fmt.Errorf("can't recheck DeletionTimestamp: %w", err)
		}
		if fresh.GetUID() != owner.GetUID() {
			return fmt.Errorf("original %s %s/%s is gone: got uid %s, wanted %s", kind, owner.GetNamespace(), owner.GetName(), fresh.GetUID(), owner.GetUID())
		}
		if ts := fresh.GetDeletionTimestamp(); ts != nil {
			return fmt.Errorf("%s/%s has just been deleted at %v", fresh.GetNamespace(), fresh.GetName(), ts)
		}
		return nil
	}
}

// adoptMeta and releaseMeta are the metadata of the two patches, in the
// field order kube-controller-manager sends.
type adoptMeta struct {
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
	UID             types.UID               `json:"uid"`
	Finalizers      []string                `json:"finalizers,omitempty"`
}

type releaseMeta struct {
	UID              types.UID           `json:"uid"`
	OwnerReferences  []map[string]string `json:"ownerReferences"`
	DeleteFinalizers []string            `json:"$deleteFromPrimitiveList/finalizers,omitempty"`
}

// AdoptPatch is the strategic merge patch that adds owner, of kind, as the
// controller of the object with UID uid, and adds finalizers.
func AdoptPatch(owner metav1.Object, kind schema.GroupVersionKind, uid types.UID, finalizers ...string) []byte {
	b, err := json.Marshal(map[string]adoptMeta{"metadata": {
		UID:             uid,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)},
		Finalizers:      finalizers,
	}})
	if err != nil {
		panic(fmt.Sprintf("encoding adoption patch: %v", err))
	}
	return b
}

// ReleasePatch is the strategic merge patch that deletes the reference to
// ownerUID from the object with UID uid, and removes finalizers.
func ReleasePatch(ownerUID, uid types.UID, finalizers ...string) []byte {
	b, err := json.Marshal(map[string]releaseMeta{"metadata": {
		UID:              uid,
		OwnerReferences:  []map[string]string{{"$patch": "delete", "uid": string(ownerUID)}},
		DeleteFinalizers: finalizers,
	}})
	if err != nil {
		panic(fmt.Sprintf("encoding release patch: %v", err))
	}
	return b
}
