package authz

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	pvutil "k8s.io/kubernetes/pkg/api/v1/persistentvolume"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
)

// The resources whose objects a node reaches only through the pods bound to it.
const (
	resSecrets        = "secrets"
	resConfigMaps     = "configmaps"
	resPVCs           = "persistentvolumeclaims"
	resPVs            = "persistentvolumes"
	resServiceAccount = "serviceaccounts"
	resResourceClaims = "resourceclaims"
)

// rootCAConfigMap holds the cluster CA bundle in every namespace; the kube-api-access
// volume projects it.
const rootCAConfigMap = "kube-root-ca.crt"

// objectRef names a namespaced object a pod depends on; resource is its plural.
type objectRef struct{ resource, namespace, name string }

type podKey struct{ namespace, name string }

// boundPod is what the graph keeps of a pod bound to a node.
type boundPod struct {
	node string
	uid  types.UID
	refs []objectRef
}

// boundPV is a PersistentVolume bound to a claim, with the Secrets the kubelet reads
// for it (all in the claim's namespace or named by the PV).
type boundPV struct {
	claim   podKey
	secrets []objectRef
}

// NodeGraph is the node authorizer's index of which node may read which object, as
// Kubernetes' node authorizer graph: pod → node, and secret / configmap / PVC /
// serviceaccount / resourceclaim → pod, pv → pvc, secret → pv. Instead of walking
// edges it keeps, for every object, how many pods on each node use it, so a decision
// is a few map lookups under a read lock. It is fed from pod and PersistentVolume
// informers (SetPod, DeletePod, SetPV, DeletePV) and safe for concurrent use.
type NodeGraph struct {
	mu   sync.RWMutex
	pods map[podKey]boundPod
	// uses counts, per object, the pods on each node that use it.
	uses map[objectRef]map[string]int
	pvs  map[string]boundPV
	// pvsOfSecret lists the PVs that name a Secret.
	pvsOfSecret map[objectRef]map[string]bool
}

// NewNodeGraph returns an empty graph.
func NewNodeGraph() *NodeGraph {
	return &NodeGraph{pods: map[podKey]boundPod{}, uses: map[objectRef]map[string]int{},
		pvs: map[string]boundPV{}, pvsOfSecret: map[objectRef]map[string]bool{}}
}

// podRefs lists, without duplicates, the objects pod makes its node read: its
// ServiceAccount, the Secrets and ConfigMaps of its volumes (projected included),
// env and envFrom of all its containers and imagePullSecrets, its claims (ephemeral
// volumes' included) and ResourceClaims. A mirror pod gives none: a node creates it
// itself and must not gain access through it.
//
// Kubernetes' ServiceAccount admission writes serviceAccountName "default" into a pod
// without one and adds the kube-api-access volume (a token and the ConfigMap
// kube-root-ca.crt) unless automountServiceAccountToken is false; tranche's agent adds
// both to its own copy of the pod instead, so the graph counts them here.
func podRefs(pod *v1.Pod) []objectRef {
	if _, mirror := pod.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return nil
	}
	seen := map[objectRef]bool{}
	var refs []objectRef
	add := func(resource, name string) {
		r := objectRef{resource, pod.Namespace, name}
		if name != "" && !seen[r] {
			seen[r] = true
			refs = append(refs, r)
		}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	add(resServiceAccount, sa)
	if a := pod.Spec.AutomountServiceAccountToken; a == nil || *a {
		add(resConfigMaps, rootCAConfigMap)
	}
	podutil.VisitPodSecretNames(pod, func(name string) bool { add(resSecrets, name); return true })
	podutil.VisitPodConfigmapNames(pod, func(name string) bool { add(resConfigMaps, name); return true })
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			add(resPVCs, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			add(resPVCs, pod.Name+"-"+v.Name) // the claim's name, as the ephemeral volume controller makes it
		}
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			add(resResourceClaims, *c.ResourceClaimName)
		}
	}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			add(resResourceClaims, *s.ResourceClaimName)
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		add(resResourceClaims, s.ResourceClaimName)
	}
	return refs
}

// SetPod records pod's current binding and references; a pod not bound to a node
// gives nothing.
func (g *NodeGraph) SetPod(pod *v1.Pod) {
	key := podKey{pod.Namespace, pod.Name}
	var refs []objectRef
	if pod.Spec.NodeName != "" {
		refs = podRefs(pod)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removePodLocked(key)
	if pod.Spec.NodeName == "" {
		return
	}
	g.pods[key] = boundPod{node: pod.Spec.NodeName, uid: pod.UID, refs: refs}
	for _, r := range refs {
		byNode := g.uses[r]
		if byNode == nil {
			byNode = map[string]int{}
			g.uses[r] = byNode
		}
		byNode[pod.Spec.NodeName]++
	}
}

// DeletePod forgets a pod.
func (g *NodeGraph) DeletePod(namespace, name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removePodLocked(podKey{namespace, name})
}

func (g *NodeGraph) removePodLocked(key podKey) {
	old, ok := g.pods[key]
	if !ok {
		return
	}
	delete(g.pods, key)
	for _, r := range old.refs {
		byNode := g.uses[r]
		if byNode[old.node]--; byNode[old.node] <= 0 {
			delete(byNode, old.node)
		}
		if len(byNode) == 0 {
			delete(g.uses, r)
		}
	}
}

// SetPV records which claim a PersistentVolume is bound to (spec.claimRef) and the
// Secrets a node reads to mount it; an unbound PV gives nothing.
func (g *NodeGraph) SetPV(pv *v1.PersistentVolume) {
	var entry boundPV
	bound := pv.Spec.ClaimRef != nil
	if bound {
		entry.claim = podKey{pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name}
		pvutil.VisitPVSecretNames(pv, func(namespace, name string, kubeletVisible bool) bool {
			if kubeletVisible {
				entry.secrets = append(entry.secrets, objectRef{resSecrets, namespace, name})
			}
			return true
		})
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removePVLocked(pv.Name)
	if !bound {
		return
	}
	g.pvs[pv.Name] = entry
	for _, s := range entry.secrets {
		if g.pvsOfSecret[s] == nil {
			g.pvsOfSecret[s] = map[string]bool{}
		}
		g.pvsOfSecret[s][pv.Name] = true
	}
}

// DeletePV forgets a PersistentVolume.
func (g *NodeGraph) DeletePV(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removePVLocked(name)
}

func (g *NodeGraph) removePVLocked(name string) {
	old, ok := g.pvs[name]
	if !ok {
		return
	}
	delete(g.pvs, name)
	for _, s := range old.secrets {
		delete(g.pvsOfSecret[s], name)
		if len(g.pvsOfSecret[s]) == 0 {
			delete(g.pvsOfSecret, s)
		}
	}
}

// Related reports whether node has a pod that uses the object resource/namespace/name
// (resource is one of secrets, configmaps, persistentvolumeclaims, persistentvolumes,
// serviceaccounts, resourceclaims; a PersistentVolume has no namespace).
func (g *NodeGraph) Related(node, resource, namespace, name string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	switch resource {
	case resPVs:
		return g.pvRelatedLocked(node, name)
	case resSecrets:
		r := objectRef{resource, namespace, name}
		if g.uses[r][node] > 0 {
			return true
		}
		for pv := range g.pvsOfSecret[r] {
			if g.pvRelatedLocked(node, pv) {
				return true
			}
		}
		return false
	}
	return g.uses[objectRef{resource, namespace, name}][node] > 0
}

func (g *NodeGraph) pvRelatedLocked(node, pv string) bool {
	b, ok := g.pvs[pv]
	return ok && g.uses[objectRef{resPVCs, b.claim.namespace, b.claim.name}][node] > 0
}

// PodNode returns the node pod namespace/name is bound to and its UID; found is false
// for a pod the graph does not know or that is not bound.
func (g *NodeGraph) PodNode(namespace, name string) (node string, uid types.UID, found bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p, ok := g.pods[podKey{namespace, name}]
	return p.node, p.uid, ok
}
