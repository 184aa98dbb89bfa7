package volumes

import (
	"hash/fnv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Names of the service account volume, as Kubernetes' ServiceAccount
// admission plugin creates it.
const (
	// ServiceAccountMountPath is where containers find token, ca.crt and
	// namespace.
	ServiceAccountMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
	// ServiceAccountVolumePrefix starts the volume's name, followed by five
	// characters.
	ServiceAccountVolumePrefix = "kube-api-access-"
	// RootCAConfigMap holds the cluster CA bundle under the key ca.crt in
	// every namespace.
	RootCAConfigMap = "kube-root-ca.crt"
	// ServiceAccountTokenSeconds is the token lifetime the admission plugin
	// requests: an hour plus seven seconds, so the API server can tell
	// these tokens from others.
	ServiceAccountTokenSeconds int64 = 3607
)

// nameAlphabet is the alphabet of generated name suffixes (apimachinery's
// rand.String): no vowels, so no words, and no look-alike characters.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// ServiceAccountVolume returns the kube-api-access-xxxxx projected volume
// and its read-only mount that Kubernetes' ServiceAccount admission adds to
// a pod: a bound token (3607 s) at token, the CA bundle from the ConfigMap
// kube-root-ca.crt at ca.crt, and the pod's namespace at namespace, with
// mode 0644. tranche's agent adds them to its own copy of the pod before
// Prepare, and the mount to each container and init container that has no
// mount at ServiceAccountMountPath.
//
// It returns false when the pod sets automountServiceAccountToken to
// false, already has a kube-api-access- volume, or has no container that
// lacks a mount at ServiceAccountMountPath; then nothing is to be added.
// The ServiceAccount's own automountServiceAccountToken is the caller's to
// check, as it needs an API read. The name's suffix derives from the pod's
// UID, so every sync of a pod yields the same volume.
func ServiceAccountVolume(pod *v1.Pod) (v1.Volume, v1.VolumeMount, bool) {
	if pod == nil || (pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken) {
		return v1.Volume{}, v1.VolumeMount{}, false
	}
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, ServiceAccountVolumePrefix) {
			return v1.Volume{}, v1.VolumeMount{}, false
		}
	}
	if !anyContainerLacksMount(pod) {
		return v1.Volume{}, v1.VolumeMount{}, false
	}
	name := ServiceAccountVolumePrefix + suffix(string(pod.UID))
	vol := v1.Volume{
		Name: name,
		VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
			Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{
					Path:              "token",
					ExpirationSeconds: ptr.To(ServiceAccountTokenSeconds),
				}},
				{ConfigMap: &v1.ConfigMapProjection{
					LocalObjectReference: v1.LocalObjectReference{Name: RootCAConfigMap},
					Items:                []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}},
				}},
				{DownwardAPI: &v1.DownwardAPIProjection{
					Items: []v1.DownwardAPIVolumeFile{{
						Path:     "namespace",
						FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"},
					}},
				}},
			},
			DefaultMode: ptr.To(defaultFileMode),
		}},
	}
	return vol, v1.VolumeMount{Name: name, ReadOnly: true, MountPath: ServiceAccountMountPath}, true
}

// anyContainerLacksMount reports whether some container or init container
// has no mount at ServiceAccountMountPath.
func anyContainerLacksMount(pod *v1.Pod) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			has := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == ServiceAccountMountPath {
					has = true
					break
				}
			}
			if !has {
				return true
			}
		}
	}
	return false
}

// suffix returns five characters of nameAlphabet derived from seed.
func suffix(seed string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(seed))
	n := h.Sum64()
	out := make([]byte, 5)
	for i := range out {
		out[i] = nameAlphabet[n%uint64(len(nameAlphabet))]
		n /= uint64(len(nameAlphabet))
	}
	return string(out)
}
