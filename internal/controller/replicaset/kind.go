package replicaset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// owners is the kind of object the controller keeps pods for, seen as
// ReplicaSets: apps/v1 ReplicaSets themselves, or core/v1
// ReplicationControllers converted (see rc.go). Objects it returns carry
// their real kind in TypeMeta when it is not ReplicaSet, so that
// ownerReferences and events name the real object.
type owners interface {
	// kind is written into the ownerReferences of the pods.
	kind() schema.GroupVersionKind
	informer() cache.SharedIndexInformer
	// get and list read the informer cache.
	get(namespace, name string) (*appsv1.ReplicaSet, error)
	list(namespace string) ([]*appsv1.ReplicaSet, error)
	// fetch reads the API server.
	fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error)
}

// ownerKind is the kind rs stands for: ReplicaSet unless its TypeMeta says
// otherwise.
func ownerKind(rs *appsv1.ReplicaSet) schema.GroupVersionKind {
	if rs.Kind != "" && rs.Kind != controllerKind.Kind {
		return rs.GroupVersionKind()
	}
	return controllerKind
}

// replicaSets are the apps/v1 ReplicaSets.
type replicaSets struct {
	client kubernetes.Interface
	inf    cache.SharedIndexInformer
	lister appslisters.ReplicaSetLister
}

func newReplicaSets(client kubernetes.Interface, factory informers.SharedInformerFactory) *replicaSets {
	i := factory.Apps().V1().ReplicaSets()
	return &replicaSets{client: client, inf: i.Informer(), lister: i.Lister()}
}

func (r *replicaSets) kind() schema.GroupVersionKind       { return controllerKind }
func (r *replicaSets) informer() cache.SharedIndexInformer { return r.inf }

func (r *replicaSets) get(namespace, name string) (*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(namespace).Get(name)
}

func (r *replicaSets) list(namespace string) ([]*appsv1.ReplicaSet, error) {
	return r.lister.ReplicaSets(namespace).List(labels.Everything())
}

func (r *replicaSets) fetch(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	return r.client.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (r *replicaSets) updateStatus(ctx context.Context, rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return r.client.AppsV1().ReplicaSets(rs.Namespace).UpdateStatus(ctx, rs, metav1.UpdateOptions{})
}
