package metrics

import (
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// Group resources of the metrics API, for errors.
var (
	nodesResource = schema.GroupResource{Group: metricsv1beta1.SchemeGroupVersion.Group, Resource: "nodes"}
	podsResource  = schema.GroupResource{Group: metricsv1beta1.SchemeGroupVersion.Group, Resource: "pods"}
)

// Lister reads the pods or nodes the metrics are about (their names, namespaces and
// labels); informer caches in the server.
type Lister interface {
	// List returns the objects in namespace ("" for all, or for nodes) whose labels
	// match sel.
	List(namespace string, sel labels.Selector) ([]metav1.Object, error)
	// Get returns one object, or an error for which apierrors.IsNotFound holds.
	Get(namespace, name string) (metav1.Object, error)
}

// API answers metrics.k8s.io/v1beta1 from a Store, as metrics-server does: NodeMetrics
// and PodMetrics for the nodes and pods that exist and have two readings, labelled as
// they are, with CPU as the rate over the window between the readings.
type API struct {
	Store *Store
	Nodes Lister
	Pods  Lister
	// Now stamps creationTimestamp (time.Now when nil).
	Now func() time.Time
}

func (a *API) now() metav1.Time {
	if a.Now != nil {
		return metav1.NewTime(a.Now())
	}
	return metav1.Now()
}

// Query selects objects of a list: labelSelector and fieldSelector (metadata.name and
// metadata.namespace) as the request gave them.
type Query struct {
	Labels labels.Selector
	Fields fields.Selector
}

// ParseQuery parses a list request's labelSelector and fieldSelector parameters.
func ParseQuery(labelSelector, fieldSelector string) (Query, error) {
	q := Query{Labels: labels.Everything(), Fields: fields.Everything()}
	var err error
	if labelSelector != "" {
		if q.Labels, err = labels.Parse(labelSelector); err != nil {
			return Query{}, apierrors.NewBadRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
	}
	if fieldSelector != "" {
		if q.Fields, err = fields.ParseSelector(fieldSelector); err != nil {
			return Query{}, apierrors.NewBadRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
	}
	return q, nil
}

func (q Query) fieldsMatch(o metav1.Object) bool {
	return q.Fields == nil || q.Fields.Matches(fields.Set{"metadata.name": o.GetName(), "metadata.namespace": o.GetNamespace()})
}

// quantities are a usage as a ResourceList: CPU in nanocores, memory in bytes (shown
// in Ki), the units metrics-server uses.
func quantities(u Usage) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewScaledQuantity(int64(u.CPU), resource.Nano),
		v1.ResourceMemory: *resource.NewQuantity(int64(u.Memory), resource.BinarySI),
	}
}

// NodeMetrics returns a node's metrics; NotFound when the node does not exist or has
// no usage yet.
func (a *API) NodeMetrics(name string) (*metricsv1beta1.NodeMetrics, error) {
	node, err := a.Nodes.Get("", name)
	if err != nil {
		return nil, getError(err, nodesResource, name)
	}
	m, ok := a.nodeMetrics(node)
	if !ok {
		return nil, apierrors.NewNotFound(nodesResource, name)
	}
	return m, nil
}

// ListNodeMetrics returns the metrics of the nodes q selects that have usage, by name.
func (a *API) ListNodeMetrics(q Query) (*metricsv1beta1.NodeMetricsList, error) {
	nodes, err := a.Nodes.List("", q.Labels)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := &metricsv1beta1.NodeMetricsList{TypeMeta: typeMeta("NodeMetricsList"), Items: []metricsv1beta1.NodeMetrics{}}
	for _, n := range sortObjects(nodes) {
		if !q.fieldsMatch(n) {
			continue
		}
		if m, ok := a.nodeMetrics(n); ok {
			out.Items = append(out.Items, *m)
		}
	}
	return out, nil
}

func (a *API) nodeMetrics(node metav1.Object) (*metricsv1beta1.NodeMetrics, bool) {
	u, ok := a.Store.Node(node.GetName())
	if !ok {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		TypeMeta:   typeMeta("NodeMetrics"),
		ObjectMeta: metav1.ObjectMeta{Name: node.GetName(), Labels: node.GetLabels(), CreationTimestamp: a.now()},
		Timestamp:  metav1.NewTime(u.Timestamp),
		Window:     metav1.Duration{Duration: u.Window},
		Usage:      quantities(u),
	}, true
}

// PodMetrics returns a pod's metrics; NotFound when the pod does not exist or has no
// usage yet.
func (a *API) PodMetrics(namespace, name string) (*metricsv1beta1.PodMetrics, error) {
	pod, err := a.Pods.Get(namespace, name)
	if err != nil {
		return nil, getError(err, podsResource, name)
	}
	m, ok := a.podMetrics(pod)
	if !ok {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return m, nil
}

// ListPodMetrics returns the metrics of the pods of namespace ("" for all) that q
// selects and that have usage, by namespace and name.
func (a *API) ListPodMetrics(namespace string, q Query) (*metricsv1beta1.PodMetricsList, error) {
	pods, err := a.Pods.List(namespace, q.Labels)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := &metricsv1beta1.PodMetricsList{TypeMeta: typeMeta("PodMetricsList"), Items: []metricsv1beta1.PodMetrics{}}
	for _, p := range sortObjects(pods) {
		if !q.fieldsMatch(p) {
			continue
		}
		if m, ok := a.podMetrics(p); ok {
			out.Items = append(out.Items, *m)
		}
	}
	return out, nil
}

func (a *API) podMetrics(pod metav1.Object) (*metricsv1beta1.PodMetrics, bool) {
	cs, at, window, ok := a.Store.Pod(types.NamespacedName{Namespace: pod.GetNamespace(), Name: pod.GetName()})
	if !ok {
		return nil, false
	}
	m := &metricsv1beta1.PodMetrics{
		TypeMeta:   typeMeta("PodMetrics"),
		ObjectMeta: metav1.ObjectMeta{Name: pod.GetName(), Namespace: pod.GetNamespace(), Labels: pod.GetLabels(), CreationTimestamp: a.now()},
		Timestamp:  metav1.NewTime(at),
		Window:     metav1.Duration{Duration: window},
		Containers: make([]metricsv1beta1.ContainerMetrics, 0, len(cs)),
	}
	for _, c := range cs {
		m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name, Usage: quantities(c.Usage)})
	}
	return m, true
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: metricsv1beta1.SchemeGroupVersion.String()}
}

func sortObjects(objs []metav1.Object) []metav1.Object {
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].GetNamespace() != objs[j].GetNamespace() {
			return objs[i].GetNamespace() < objs[j].GetNamespace()
		}
		return objs[i].GetName() < objs[j].GetName()
	})
	return objs
}

// getError is the error of a get whose object could not be read: NotFound for the
// metrics resource when the node or pod does not exist.
func getError(err error, gr schema.GroupResource, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(gr, name)
	}
	return apierrors.NewInternalError(err)
}
