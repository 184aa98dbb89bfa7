package job

import (
	"context"
	"errors"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// orphanPrefix marks a queue key naming a pod, not a Job: a pod carrying the
// tracking finalizer with no Job to remove it.
const orphanPrefix = "orphan-pod:"

// orphanFinalizerHeld says whether pod keeps the tracking finalizer although no
// Job will count it: it has no controller, or its controller is a Job the cache
// does not have. As upstream's job controller, such a pod loses the finalizer
// whatever its phase, or it could never be deleted (the 'should delete a job'
// spec waits for the garbage collector to remove the pods of a deleted Job).
func (c *Controller) orphanFinalizerHeld(ns string, ref *metav1.OwnerReference) bool {
	if ref == nil {
		return true
	}
	if ref.Kind != controllerKind.Kind || ref.APIVersion != controllerKind.GroupVersion().String() {
		return false
	}
	job, err := c.jobs.Jobs(ns).Get(ref.Name)
	return apierrors.IsNotFound(err) || (err == nil && job.UID != ref.UID)
}

// syncOrphanPod removes the tracking finalizer of the pod named by key
// (namespace/name) if it is still an orphan.
func (c *Controller) syncOrphanPod(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if err != nil || !hasFinalizer(pod) || !c.orphanFinalizerHeld(ns, metav1.GetControllerOf(pod)) {
		return nil
	}
	return c.patchPod(ctx, pod, removeFinalizerPatch)
}

// releaseDeletedJobPods removes the tracking finalizer of the pods the deleted
// Job ns/name controlled.
func (c *Controller) releaseDeletedJobPods(ctx context.Context, ns, name string) error {
	pods, err := c.pods.Pods(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var errs []error
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		if ref == nil || ref.Name != name || !hasFinalizer(pod) || !c.orphanFinalizerHeld(ns, ref) {
			continue
		}
		errs = append(errs, c.patchPod(ctx, pod, removeFinalizerPatch))
	}
	return errors.Join(errs...)
}

// isOrphanKey splits an orphan pod's queue key.
func isOrphanKey(key string) (string, bool) {
	return strings.CutPrefix(key, orphanPrefix)
}
