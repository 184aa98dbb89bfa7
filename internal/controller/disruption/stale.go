package disruption

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/tranche/tranche/internal/tombstone"
)

// StalePodDisruptionTimeout is how long a pod may carry a DisruptionTarget condition
// without being deleted (an eviction whose deletion failed) before the controller
// turns the condition False, as upstream.
const StalePodDisruptionTimeout = 2 * time.Minute

// staleDisruption reports whether pod carries a DisruptionTarget condition that will be
// stale (True, the pod neither deleting nor finished, not set by the kubelet) and how
// long until it is.
func staleDisruption(pod *v1.Pod, now time.Time) (bool, time.Duration) {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false, 0
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.DisruptionTarget {
			continue
		}
		if c.Status != v1.ConditionTrue || c.Reason == v1.PodReasonTerminationByKubelet {
			return false, 0
		}
		return true, max(StalePodDisruptionTimeout-now.Sub(c.LastTransitionTime.Time), 0)
	}
	return false, 0
}

// podForStaleCheck queues a pod whose DisruptionTarget condition will turn stale, for
// when it does.
func (c *Controller) podForStaleCheck(obj any) {
	pod := tombstone.As[*v1.Pod](obj)
	if pod == nil {
		return
	}
	if has, after := staleDisruption(pod, c.clock.Now()); has {
		if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
			c.staleQueue.AddAfter(key, after)
		}
	}
}

// syncStale turns a pod's stale DisruptionTarget condition False.
func (c *Controller) syncStale(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := c.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	has, after := staleDisruption(pod, c.clock.Now())
	if !has {
		return nil
	}
	if after > 0 {
		c.staleQueue.AddAfter(key, after)
		return nil
	}
	out := pod.DeepCopy()
	for i := range out.Status.Conditions {
		if cond := &out.Status.Conditions[i]; cond.Type == v1.DisruptionTarget {
			cond.Status, cond.LastTransitionTime = v1.ConditionFalse, metav1.NewTime(c.clock.Now())
		}
	}
	_, err = c.client.CoreV1().Pods(ns).UpdateStatus(ctx, out, metav1.UpdateOptions{})
	return err
}
