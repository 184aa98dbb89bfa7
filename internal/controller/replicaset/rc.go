package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// rcKind is the kind written into the ownerReferences of a
// ReplicationController's pods.
var rcKind = v1.SchemeGroupVersion.WithKind("ReplicationController")

// NewReplicationManager builds the ReplicationController controller: the
// ReplicaSet controller over ReplicationControllers converted to
// ReplicaSets (a ReplicationController is a ReplicaSet whose selector is a
// plain label map), as upstream's replication manager does. Events and
// ownerReferences name the ReplicationController. It panics when Client
// or Informers is missing, a wiring mistake.
func NewReplicationManager(cfg Config) *Controller {
	if cfg.Client == nil || cfg.Informers == nil {
		panic("replicaset.NewReplicationManager: Client and Informers are required")
	}
	i := cfg.Informers.Core().V1().ReplicationControllers()
	return newController(cfg, &replicationControllers{client: cfg.Client, inf: i.Informer(), lister: i.Lister()}, "replicationmanager")
}

// replicationControllers are the core/v1 ReplicationControllers seen as
// ReplicaSets.
type replicationControllers struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister corelisters.ReplicationControllerLister
}

func (r *replicationControllers) kind() schema.GroupVersionKind       { return rcKind }
func (r *replicationControllers) informer() cache.SharedIndexInformer { return r.inf }

func (r *replicationControllers) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := r.lister.ReplicationControllers(namespace).Get(name)
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

func (r *replicationControllers) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	rcs, err := r.lister.ReplicationControllers(namespace).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]*appsv1.ReplicaSet, len(rcs))
	for i, rc := range rcs {
		out[i] = rcToRS(rc)
	}
	return out, nil
}

func (r *replicationControllers) fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rc, err := r.client.CoreV1().ReplicationControllers(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

func (r *replicationControllers) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	rc, err := r.client.CoreV1().ReplicationControllers(rs.Namespace).UpdateStatus(ctx, rsToRC(rs), metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return rcToRS(rc), nil
}

// rcToRS converts a ReplicationController into the ReplicaSet it stands
// for, with its own kind in TypeMeta. A nil selector stays nil, which
// selects nothing, as for a ReplicationController the API server did not
// default.
func rcToRS(rc *v1.ReplicationController) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: rcKind.GroupVersion().String(), Kind: rcKind.Kind},
		ObjectMeta: *rc.ObjectMeta.DeepCopy(),
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if rc.Spec.Selector != nil {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rc.Spec.Template.DeepCopyInto(&rs.Spec.Template)
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// rsToRC is rcToRS's inverse; match expressions, which a converted
// ReplicationController never has, are dropped.
func rsToRC(rs *appsv1.ReplicaSet) *v1.ReplicationController {
	rc := &v1.ReplicationController{
		ObjectMeta: *rs.ObjectMeta.DeepCopy(),
		Spec: v1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        rs.Spec.Template.DeepCopy(),
		},
		Status: v1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, v1.ReplicationControllerCondition{
			Type: v1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}
