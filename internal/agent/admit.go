package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/tranche/tranche/internal/hostports"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Kubelet's wording for a pod whose host ports the node has given away already
// (pkg/kubelet/lifecycle: the NodePorts predicate, and rejectPod's prefix).
const (
	reasonNodePorts   = "NodePorts"
	msgNodePorts      = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
	msgRejectedPrefix = "Pod was rejected: "
)

// admission remembers the pods admitted but maybe not yet showing a
// status.startTime, so that two new pods wanting one host port, synced at
// once, are not both admitted. Its zero value is ready to use.
type admission struct {
	mu       sync.Mutex
	admitted map[types.UID]bool
}

// admit is the part of kubelet's pod admission the agent does before it starts
// a pod: a pod bound to the node past the scheduler (spec.nodeName set by its
// author) that wants a host port another admitted pod of the node holds is
// rejected, phase Failed with reason NodePorts, as kubelet rejects it, so that
// its controller replaces it (the sig-apps spec 'Should recreate evicted
// statefulset'). Pods are admitted in the order their syncs reach this point;
// a pod already started (status.startTime set) is never judged again. It
// reports whether pod was rejected.
func (p *Pods) admit(ctx context.Context, pod *v1.Pod) (bool, error) {
	if pod.Status.StartTime != nil || pod.DeletionTimestamp != nil || len(hostports.Of(pod)) == 0 {
		return false, nil
	}
	a := &p.admission
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admitted[pod.UID] {
		return false, nil
	}
	others, err := p.lister.List(labels.Everything())
	if err != nil {
		return false, err
	}
	live := map[types.UID]bool{}
	var holder *v1.Pod
	for _, o := range others {
		live[o.UID] = true
		if o.UID == pod.UID || o.Status.Phase == v1.PodSucceeded || o.Status.Phase == v1.PodFailed {
			continue
		}
		if (o.Status.StartTime != nil || a.admitted[o.UID]) && hostports.Conflict(hostports.Of(pod), hostports.Of(o)) {
			holder = o
			break
		}
	}
	for uid := range a.admitted {
		if !live[uid] {
			delete(a.admitted, uid)
		}
	}
	if holder == nil {
		if a.admitted == nil {
			a.admitted = map[types.UID]bool{}
		}
		a.admitted[pod.UID] = true
		return false, nil
	}
	next := pod.DeepCopy()
	next.Status = v1.PodStatus{Phase: v1.PodFailed, Reason: reasonNodePorts, Message: msgRejectedPrefix + msgNodePorts, QOSClass: pod.Status.QOSClass}
	if _, err := p.cfg.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The informer brings the newer object; the sync runs again then.
			return true, nil
		}
		return true, fmt.Errorf("rejecting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	p.event(pod, v1.EventTypeWarning, reasonNodePorts, msgNodePorts)
	p.log.Info("pod rejected", "pod", pod.Namespace+"/"+pod.Name, "reason", reasonNodePorts, "holder", holder.Namespace+"/"+holder.Name)
	return true, nil
}
