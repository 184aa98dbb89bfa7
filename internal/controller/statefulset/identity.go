package statefulset

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var controllerKind = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

var podKind = v1.SchemeGroupVersion.WithKind("Pod")

// ordinalPattern splits a pod name into "<set>-<ordinal>".
var ordinalPattern = regexp.MustCompile(`^(.*)-([0-9]+)$`)

// ordinalOf returns the ordinal in a pod's name and whether the name is
// "<set>-<ordinal>" for this set.
func ordinalOf(set *appsv1.StatefulSet, pod *v1.Pod) (int, bool) {
	m := ordinalPattern.FindStringSubmatch(pod.Name)
	if m == nil || m[1] != set.Name {
		return 0, false
	}
	n, err := strconv.Atoi(m[2])
	if err != nil {
		return 0, false
	}
	return n, true
}

// ordinalRange is [start, start+replicas): the ordinals the set runs.
func ordinalRange(set *appsv1.StatefulSet) (start, end int) {
	if set.Spec.Ordinals != nil {
		start = int(set.Spec.Ordinals.Start)
	}
	replicas := 1
	if set.Spec.Replicas != nil {
		replicas = int(*set.Spec.Replicas)
	}
	return start, start + max(replicas, 0)
}

func podName(set *appsv1.StatefulSet, ordinal int) string {
	return fmt.Sprintf("%s-%d", set.Name, ordinal)
}

// claimName is "<claim template>-<set>-<ordinal>".
func claimName(set *appsv1.StatefulSet, tmpl *v1.PersistentVolumeClaim, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", tmpl.Name, set.Name, ordinal)
}

// newPod builds the pod of one ordinal from a revision's template: its
// stable name, hostname and subdomain, the identity labels and the volumes
// bound to its claims.
func newPod(set *appsv1.StatefulSet, tmpl *v1.PodTemplateSpec, revision string, ordinal int) *v1.Pod {
	t := tmpl.DeepCopy()
	name := podName(set, ordinal)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       set.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
		},
		Spec: t.Spec,
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = revision
	pod.Spec.Hostname = name
	pod.Spec.Subdomain = set.Spec.ServiceName
	for i := range set.Spec.VolumeClaimTemplates {
		ct := &set.Spec.VolumeClaimTemplates[i]
		vol := v1.Volume{Name: ct.Name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			ClaimName: claimName(set, ct, ordinal)}}}
		replaced := false
		for j := range pod.Spec.Volumes {
			if pod.Spec.Volumes[j].Name == ct.Name {
				pod.Spec.Volumes[j] = vol
				replaced = true
			}
		}
		if !replaced {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	return pod
}

// newClaims builds the claims of one ordinal from the templates, labelled
// with the set's selector labels.
func newClaims(set *appsv1.StatefulSet, ordinal int) []*v1.PersistentVolumeClaim {
	var out []*v1.PersistentVolumeClaim
	for i := range set.Spec.VolumeClaimTemplates {
		ct := &set.Spec.VolumeClaimTemplates[i]
		c := &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{
				Name:        claimName(set, ct, ordinal),
				Namespace:   set.Namespace,
				Labels:      copyMap(ct.Labels),
				Annotations: copyMap(ct.Annotations),
			},
			Spec: *ct.Spec.DeepCopy(),
		}
		if set.Spec.Selector != nil {
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			for k, v := range set.Spec.Selector.MatchLabels {
				c.Labels[k] = v
			}
		}
		out = append(out, c)
	}
	return out
}

// claimOwners returns the claim's ownerReferences under the set's
// persistentVolumeClaimRetentionPolicy, as upstream sets them: the set owns
// it when whenDeleted is Delete (and its pod is not condemned), the pod owns
// it when whenScaled is Delete and the pod is being scaled away. Other owners
// are kept. pod may be nil when the claim's pod does not exist.
func claimOwners(set *appsv1.StatefulSet, claim *v1.PersistentVolumeClaim, pod *v1.Pod, condemned bool) []metav1.OwnerReference {
	whenDeleted, whenScaled := appsv1.RetainPersistentVolumeClaimRetentionPolicyType, appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		if p.WhenDeleted != "" {
			whenDeleted = p.WhenDeleted
		}
		if p.WhenScaled != "" {
			whenScaled = p.WhenScaled
		}
	}
	const del = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
	setOwns := whenDeleted == del && !(whenScaled == del && condemned)
	podOwns := whenScaled == del && condemned && pod != nil
	var refs []metav1.OwnerReference
	for _, r := range claim.OwnerReferences {
		if r.UID == set.UID || (pod != nil && r.UID == pod.UID) {
			continue
		}
		refs = append(refs, r)
	}
	if setOwns {
		refs = append(refs, metav1.OwnerReference{APIVersion: controllerKind.GroupVersion().String(), Kind: controllerKind.Kind,
			Name: set.Name, UID: set.UID})
	}
	if podOwns {
		refs = append(refs, metav1.OwnerReference{APIVersion: "v1", Kind: podKind.Kind, Name: pod.Name, UID: pod.UID})
	}
	return refs
}

// templateOf decodes the pod template a revision stores.
func templateOf(rev *appsv1.ControllerRevision) (*v1.PodTemplateSpec, error) {
	var patch struct {
		Spec struct {
			Template v1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("decoding ControllerRevision %s/%s: %w", rev.Namespace, rev.Name, err)
	}
	return &patch.Spec.Template, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
