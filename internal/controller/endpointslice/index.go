package endpointslice

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Index names on the shared Pod and Service informers. A sync then costs the
// Service's own pods, and a pod event the Services that could select it, instead of
// a scan of the whole namespace (the bench/endpointslice profile: 62% of the CPU of
// a 100,000-pod namespace went to that scan).
const (
	podLabelIndex       = "tranche.endpointslice/label"
	serviceSelectorIndx = "tranche.endpointslice/selector"
	podNodeIndex        = "tranche.endpointslice/node"
)

// pairKey is an index value: one label (or selector term) key=value in a namespace.
func pairKey(ns, k, v string) string { return ns + "/" + k + "=" + v }

// everythingKey indexes Services whose selector is empty ({}), which select every
// pod of their namespace.
func everythingKey(ns string) string { return ns + "/" }

func podLabelPairs(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(pod.Labels))
	for k, v := range pod.Labels {
		out = append(out, pairKey(pod.Namespace, k, v))
	}
	return out, nil
}

func podNodeName(obj any) ([]string, error) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
		return nil, nil
	}
	return []string{pod.Spec.NodeName}, nil
}

func serviceSelectorPairs(obj any) ([]string, error) {
	svc, ok := obj.(*v1.Service)
	if !ok || svc.Spec.Selector == nil {
		return nil, nil
	}
	if len(svc.Spec.Selector) == 0 {
		return []string{everythingKey(svc.Namespace)}, nil
	}
	out := make([]string, 0, len(svc.Spec.Selector))
	for k, v := range svc.Spec.Selector {
		out = append(out, pairKey(svc.Namespace, k, v))
	}
	return out, nil
}

// addIndexers registers the indexes; it must run before the informers start.
func addIndexers(pods, services cache.SharedIndexInformer) {
	if err := pods.AddIndexers(cache.Indexers{podLabelIndex: podLabelPairs, podNodeIndex: podNodeName}); err != nil {
		panic(fmt.Sprintf("endpointslice: pod indexers (the informer must not be started yet): %v", err))
	}
	if err := services.AddIndexers(cache.Indexers{serviceSelectorIndx: serviceSelectorPairs}); err != nil {
		panic(fmt.Sprintf("endpointslice: service indexers (the informer must not be started yet): %v", err))
	}
}

// selectedPods returns the pods of ns matching selector (non-nil), reading only the
// smallest index bucket among the selector's terms.
func (c *Controller) selectedPods(ns string, selector map[string]string) ([]*v1.Pod, error) {
	if len(selector) == 0 {
		return c.pods.Pods(ns).List(labels.Everything())
	}
	best, bestN := "", -1
	for k, v := range selector {
		key := pairKey(ns, k, v)
		keys, err := c.podIndex.IndexKeys(podLabelIndex, key)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, nil
		}
		if bestN < 0 || len(keys) < bestN {
			best, bestN = key, len(keys)
		}
	}
	objs, err := c.podIndex.ByIndex(podLabelIndex, best)
	if err != nil {
		return nil, err
	}
	sel := labels.SelectorFromValidatedSet(selector)
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*v1.Pod); ok && sel.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

// candidateServices returns the Services of ns whose selector shares a term with
// podLabels or is empty: the only ones that can select the pod.
func (c *Controller) candidateServices(ns string, podLabels map[string]string) ([]*v1.Service, error) {
	seen := map[string]bool{}
	var out []*v1.Service
	add := func(key string) error {
		objs, err := c.svcIndex.ByIndex(serviceSelectorIndx, key)
		if err != nil {
			return err
		}
		for _, o := range objs {
			svc, ok := o.(*v1.Service)
			if !ok || seen[svc.Name] {
				continue
			}
			seen[svc.Name] = true
			out = append(out, svc)
		}
		return nil
	}
	if err := add(everythingKey(ns)); err != nil {
		return nil, err
	}
	for k, v := range podLabels {
		if err := add(pairKey(ns, k, v)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// podsOnNode returns the pods bound to node.
func (c *Controller) podsOnNode(node string) ([]*v1.Pod, error) {
	objs, err := c.podIndex.ByIndex(podNodeIndex, node)
	if err != nil {
		return nil, err
	}
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if pod, ok := o.(*v1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}
