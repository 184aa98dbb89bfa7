package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/agent/volumes"
	"github.com/tranche/tranche/internal/apiserver"
)

// saReader serves a fixed list of ServiceAccounts.
type saReader []*v1.ServiceAccount

func (r saReader) NamespaceLabels(context.Context, string) (map[string]string, error) {
	return nil, nil
}

func (r saReader) List(_ context.Context, gvr schema.GroupVersionResource, ns string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, sa := range r {
		if gvr == serviceAccountsGVR && sa.Namespace == ns {
			out = append(out, sa)
		}
	}
	return out, nil
}

func TestServiceAccountAdmission(t *testing.T) {
	ctx := context.Background()
	sa := func(name string, automount *bool, pullSecrets ...string) *v1.ServiceAccount {
		s := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, AutomountServiceAccountToken: automount}
		for _, p := range pullSecrets {
			s.ImagePullSecrets = append(s.ImagePullSecrets, v1.LocalObjectReference{Name: p})
		}
		return s
	}
	reader := saReader{sa("default", nil), sa("robot", nil, "regcred"), sa("quiet", ptr.To(false))}
	a := newServiceAccountAdmission()
	a.interval = time.Millisecond
	pod := func(mut func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "c"}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	type want struct {
		sa          string
		mounted     bool // a kube-api-access volume mounted in every container
		pullSecrets []v1.LocalObjectReference
		err         string
	}
	tests := []struct {
		name string
		op   apiserver.AdmitOp
		sub  string
		gvr  schema.GroupVersionResource
		pod  *v1.Pod
		want want
	}{
		{name: "no account named gets default", pod: pod(nil), want: want{sa: "default", mounted: true}},
		{name: "deprecated alias", pod: pod(func(p *v1.Pod) { p.Spec.DeprecatedServiceAccount = "robot" }),
			want: want{sa: "robot", mounted: true, pullSecrets: []v1.LocalObjectReference{{Name: "regcred"}}}},
		{name: "own pull secrets kept", pod: pod(func(p *v1.Pod) {
			p.Spec.ServiceAccountName = "robot"
			p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "mine"}}
		}), want: want{sa: "robot", mounted: true, pullSecrets: []v1.LocalObjectReference{{Name: "mine"}}}},
		{name: "account opts out", pod: pod(func(p *v1.Pod) { p.Spec.ServiceAccountName = "quiet" }), want: want{sa: "quiet"}},
		{name: "pod opts in over account", pod: pod(func(p *v1.Pod) {
			p.Spec.ServiceAccountName = "quiet"
			p.Spec.AutomountServiceAccountToken = ptr.To(true)
		}), want: want{sa: "quiet", mounted: true}},
		{name: "pod opts out", pod: pod(func(p *v1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(false) }),
			want: want{sa: "default"}},
		{name: "missing account", pod: pod(func(p *v1.Pod) { p.Spec.ServiceAccountName = "missing" }),
			want: want{err: `pods "p" is forbidden: error looking up service account ns/missing: serviceaccount "missing" not found`}},
		{name: "mirror pod untouched", pod: pod(func(p *v1.Pod) {
			p.Annotations = map[string]string{mirrorPodAnnotation: "x"}
		})},
		{name: "update untouched", op: apiserver.AdmitUpdate, pod: pod(nil)},
		{name: "subresource untouched", sub: "status", pod: pod(nil)},
		{name: "other resource", gvr: schema.GroupVersionResource{Version: "v1", Resource: "services"}, pod: pod(nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gvr := tc.gvr
			if gvr.Resource == "" {
				gvr = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
			}
			req := &apiserver.AdmissionRequest{Operation: tc.op, Resource: gvr, Subresource: tc.sub, Namespace: "ns", Name: "p",
				Object: tc.pod, Reader: reader}
			err := a.Mutate(ctx, req)
			got := ""
			if err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("error %v is not Forbidden", err)
				}
			}
			if got != tc.want.err {
				t.Fatalf("error %q, want %q", got, tc.want.err)
			}
			if err != nil {
				return
			}
			if tc.pod.Spec.ServiceAccountName != tc.want.sa {
				t.Errorf("serviceAccountName %q, want %q", tc.pod.Spec.ServiceAccountName, tc.want.sa)
			}
			if diff := cmp.Diff(tc.want.pullSecrets, tc.pod.Spec.ImagePullSecrets); diff != "" {
				t.Errorf("imagePullSecrets (-want +got):\n%s", diff)
			}
			var vols []string
			for _, v := range tc.pod.Spec.Volumes {
				vols = append(vols, v.Name)
			}
			if !tc.want.mounted {
				if len(vols) != 0 {
					t.Errorf("volumes %v, want none", vols)
				}
				return
			}
			if len(vols) != 1 || !strings.HasPrefix(vols[0], volumes.ServiceAccountVolumePrefix) || len(vols[0]) != len(volumes.ServiceAccountVolumePrefix)+5 {
				t.Fatalf("volumes %v, want one kube-api-access-xxxxx", vols)
			}
			src := tc.pod.Spec.Volumes[0].Projected
			if src == nil || len(src.Sources) != 3 || src.Sources[0].ServiceAccountToken == nil ||
				*src.Sources[0].ServiceAccountToken.ExpirationSeconds != volumes.ServiceAccountTokenSeconds {
				t.Errorf("volume source %+v, want token, ca.crt and namespace", src)
			}
			wantMount := []v1.VolumeMount{{Name: vols[0], ReadOnly: true, MountPath: volumes.ServiceAccountMountPath}}
			for _, c := range append(tc.pod.Spec.InitContainers, tc.pod.Spec.Containers...) {
				if diff := cmp.Diff(wantMount, c.VolumeMounts); diff != "" {
					t.Errorf("container %s mounts (-want +got):\n%s", c.Name, diff)
				}
			}
		})
	}
}

func TestServiceAccountAdmissionKeepsOwnMount(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "own", VolumeMounts: []v1.VolumeMount{{Name: "x", MountPath: volumes.ServiceAccountMountPath}}},
	}}}
	mountServiceAccountToken(p)
	if len(p.Spec.Volumes) != 0 || len(p.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("a pod whose only container mounts the path got %+v", p.Spec)
	}
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "other"})
	p.Spec.Volumes = []v1.Volume{{Name: volumes.ServiceAccountVolumePrefix + "abcde"}}
	mountServiceAccountToken(p)
	if len(p.Spec.Volumes) != 1 || p.Spec.Containers[1].VolumeMounts[0].Name != volumes.ServiceAccountVolumePrefix+"abcde" {
		t.Errorf("an existing kube-api-access volume is not reused: %+v", p.Spec)
	}
}
