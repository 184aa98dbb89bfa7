package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// actuatePreemption carries out p for pod as kube-scheduler's preemption
// executor does: each victim not already being deleted gets the
// DisruptionTarget condition (reason PreemptionByScheduler) and is then
// deleted with its own grace period, with a Preempted event; pods of lower
// priority nominated to the same node lose that nomination, since the room
// is now the preemptor's. The preemptor's own nomination is remembered here
// and written by the caller with its PodScheduled condition.
func (s *Scheduler) actuatePreemption(ctx context.Context, pod *v1.Pod, p *preemption, snap *snapshot) error {
	key := cache.MetaObjectToName(pod).String()
	var errs []error
	for _, victim := range p.victims {
		if victim.DeletionTimestamp != nil {
			continue
		}
		if err := s.preemptVictim(ctx, pod, p.node, victim); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.nominated.set(key, p.node)
	s.log.Info("preempting", "pod", key, "node", p.node, "victims", len(p.victims))
	for _, other := range snap.nominated[p.node] {
		if other.UID == pod.UID || priority(other) >= priority(pod) {
			continue
		}
		otherKey := cache.MetaObjectToName(other).String()
		s.nominated.forget(otherKey)
		if other.Status.NominatedNodeName == "" {
			continue
		}
		st := other.Status.DeepCopy()
		st.NominatedNodeName = ""
		if err := patchStatus(ctx, s.client, other, st); err != nil && !apierrors.IsNotFound(err) {
			s.log.Warn("clearing nominatedNodeName", "pod", otherKey, "err", err)
		}
	}
	return nil
}

// preemptVictim marks and deletes one victim; a victim already gone is no
// error.
func (s *Scheduler) preemptVictim(ctx context.Context, preemptor *v1.Pod, node string, victim *v1.Pod) error {
	cond := v1.PodCondition{
		Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonPreemptionByScheduler,
		Message: fmt.Sprintf("%s: preempting to accommodate a higher priority pod", s.name),
	}
	if marked, changed := withCondition(victim, cond, metav1.NewTime(s.clock.Now())); changed {
		if err := patchStatus(ctx, s.client, victim, &marked.Status); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("marking victim %s/%s: %w", victim.Namespace, victim.Name, err)
		}
	}
	if err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("deleting victim %s/%s: %w", victim.Namespace, victim.Name, err)
	}
	s.recorder.Eventf(victim, v1.EventTypeNormal, "Preempted", "Preempted by pod %v on node %v", preemptor.UID, node)
	return nil
}

// patchStatus writes the difference between pod's status and status as a
// strategic merge patch of pods/status, so that it neither conflicts with
// nor undoes the node agent's concurrent writes of other fields.
func patchStatus(ctx context.Context, client kubernetes.Interface, pod *v1.Pod, status *v1.PodStatus) error {
	oldData, err := json.Marshal(v1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(v1.Pod{Status: *status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, &v1.Pod{})
	if err != nil {
		return fmt.Errorf("status patch for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if string(patch) == "{}" {
		return nil
	}
	_, err = client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// nominations are the nodes this scheduler nominated pending pods for, by
// pod key, shared by the scheduling loop and the informer handlers.
type nominations struct {
	mu    sync.Mutex
	nodes map[string]string
}

func (n *nominations) set(key, node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[key] = node
}

func (n *nominations) get(key string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	node, ok := n.nodes[key]
	return node, ok
}

func (n *nominations) forget(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.nodes, key)
}
