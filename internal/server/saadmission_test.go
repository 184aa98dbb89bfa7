package server

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/storage/memory"
)

func TestServiceAccountAdmission(t *testing.T) {
	ctx := context.Background()
	store := memory.New(time.Minute)
	if _, err := store.Create(ctx, "/registry/core/serviceaccounts/ns/robot", []byte("{}")); err != nil {
		t.Fatal(err)
	}
	a := newServiceAccountAdmission(store)
	a.interval = time.Millisecond
	pod := func(sa string, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations}, Spec: v1.PodSpec{ServiceAccountName: sa}}
	}
	tests := []struct {
		name string
		op   apiserver.AdmitOp
		gvr  string
		pod  *v1.Pod
		want string
	}{
		{name: "existing account", gvr: podsGVR, pod: pod("robot", nil)},
		{name: "no account named", gvr: podsGVR, pod: pod("", nil)},
		{name: "missing account", gvr: podsGVR, pod: pod("missing", nil),
			want: `pods "p" is forbidden: error looking up service account ns/missing: serviceaccount "missing" not found`},
		{name: "missing default", gvr: podsGVR, pod: pod("default", nil),
			want: `pods "p" is forbidden: error looking up service account ns/default: serviceaccount "default" not found`},
		{name: "mirror pod", gvr: podsGVR, pod: pod("missing", map[string]string{mirrorPodAnnotation: "x"})},
		{name: "update", op: apiserver.AdmitUpdate, gvr: podsGVR, pod: pod("missing", nil)},
		{name: "other resource", gvr: "/v1, Resource=services", pod: pod("missing", nil)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Admit(ctx, tc.op, tc.gvr, tc.pod, nil, false)
			got := ""
			if err != nil {
				got = err.Error()
				if !apierrors.IsForbidden(err) {
					t.Errorf("error %v is not Forbidden", err)
				}
			}
			if got != tc.want {
				t.Errorf("error %q, want %q", got, tc.want)
			}
		})
	}
}
