package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/tranche/tranche/internal/agent/volumes"
	"github.com/tranche/tranche/internal/apiserver"
)

var (
	podsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}.String()
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
)

// mirrorPodAnnotation marks the API copy of a static pod, which the ServiceAccount
// admission leaves alone.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// defaultServiceAccount is the account a pod naming none runs as.
const defaultServiceAccount = "default"

// serviceAccountAdmission is Kubernetes' ServiceAccount admission plugin for created
// pods, run before the pod's validation as kube-apiserver runs it: a pod naming no
// account gets "default"; a pod naming an account that does not exist in its
// namespace is refused with upstream's Forbidden wording (it looks "default" up a few
// times, as it may be about to be created with its namespace, any other once); unless
// automountServiceAccountToken says otherwise (the pod's value first, then the
// account's, true when neither sets it) the pod gets the kube-api-access-xxxxx
// projected volume and a read-only mount of it at
// /var/run/secrets/kubernetes.io/serviceaccount in every container and init container
// without a mount there; and a pod without imagePullSecrets gets the account's.
// Mirror pods are left alone.
type serviceAccountAdmission struct {
	// retries and interval bound the lookups of "default".
	retries  int
	interval time.Duration
}

var _ apiserver.Mutator = (*serviceAccountAdmission)(nil)

// newServiceAccountAdmission looks "default" up for about 3 s: upstream tries 10 times
// 100-200 ms apart, but every pod naming no account now waits for "default", which
// the per-namespace controller creates after the namespace, and a loaded 2-core
// machine running several clusters can take longer than upstream's window.
func newServiceAccountAdmission() *serviceAccountAdmission {
	return &serviceAccountAdmission{retries: 20, interval: 150 * time.Millisecond}
}

// Mutate completes a created pod as described on the type.
func (a *serviceAccountAdmission) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	if req.Operation != apiserver.AdmitCreate || req.Subresource != "" || req.Resource.String() != podsGVR {
		return nil
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok || pod == nil {
		return nil
	}
	if _, mirror := pod.Annotations[mirrorPodAnnotation]; mirror {
		return nil
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = pod.Spec.DeprecatedServiceAccount //nolint:staticcheck // the deprecated alias still names the account
	}
	if pod.Spec.ServiceAccountName == "" {
		pod.Spec.ServiceAccountName = defaultServiceAccount
	}
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName //nolint:staticcheck // kept in sync, as upstream does
	sa, err := a.lookup(ctx, req.Reader, req.Namespace, pod.Spec.ServiceAccountName)
	if err != nil {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, req.Name,
			fmt.Errorf("error looking up service account %s/%s: %w", req.Namespace, pod.Spec.ServiceAccountName, err))
	}
	if shouldAutomount(sa, pod) {
		mountServiceAccountToken(pod)
	}
	if len(pod.Spec.ImagePullSecrets) == 0 {
		for _, s := range sa.ImagePullSecrets {
			pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, v1.LocalObjectReference{Name: s.Name})
		}
	}
	return nil
}

// lookup finds ServiceAccount ns/name, trying "default" a.retries times.
func (a *serviceAccountAdmission) lookup(ctx context.Context, r apiserver.Reader, ns, name string) (*v1.ServiceAccount, error) {
	attempts := 1
	if name == defaultServiceAccount {
		attempts = a.retries
	}
	for i := range attempts {
		if i > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(a.interval):
			}
		}
		list, err := r.List(ctx, serviceAccountsGVR, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range list {
			if sa, ok := o.(*v1.ServiceAccount); ok && sa.Name == name {
				return sa, nil
			}
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccount"}, name)
}

// shouldAutomount applies upstream's precedence: the pod's
// automountServiceAccountToken, then the account's, else true.
func shouldAutomount(sa *v1.ServiceAccount, pod *v1.Pod) bool {
	if pod.Spec.AutomountServiceAccountToken != nil {
		return *pod.Spec.AutomountServiceAccountToken
	}
	if sa.AutomountServiceAccountToken != nil {
		return *sa.AutomountServiceAccountToken
	}
	return true
}

// mountServiceAccountToken mounts the pod's kube-api-access- volume (a new one with a
// random suffix when it has none) in every container and init container lacking a
// mount at the service account path, and adds the volume when some container got it.
func mountServiceAccountToken(pod *v1.Pod) {
	name := ""
	for _, v := range pod.Spec.Volumes {
		if strings.HasPrefix(v.Name, volumes.ServiceAccountVolumePrefix) {
			name = v.Name
			break
		}
	}
	hasVolume := name != ""
	if !hasVolume {
		name = volumes.ServiceAccountVolumePrefix + utilrand.String(5)
	}
	mount := v1.VolumeMount{Name: name, ReadOnly: true, MountPath: volumes.ServiceAccountMountPath}
	needed := false
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			has := false
			for _, m := range c.VolumeMounts {
				if m.MountPath == volumes.ServiceAccountMountPath {
					has = true
					break
				}
			}
			if !has {
				c.VolumeMounts = append(c.VolumeMounts, mount)
				needed = true
			}
		}
	}
	if hasVolume || !needed {
		return
	}
	// The agent's definition of the volume, under the name chosen here.
	probe := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{}}}}
	vol, _, _ := volumes.ServiceAccountVolume(probe)
	vol.Name = name
	pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
}
