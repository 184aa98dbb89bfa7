package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makePVC returns a valid, defaulted pending claim "data" for 1Gi, after mutate.
func makePVC(mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	pvc := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default", CreationTimestamp: svcTestCreated},
		Spec: v1.PersistentVolumeClaimSpec{
			AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	DefaultPersistentVolumeClaim(pvc)
	if mutate != nil {
		mutate(pvc)
	}
	return pvc
}

// pvcBound makes a claim bound to pv1 with the status the binder writes.
func pvcBound(pvc *v1.PersistentVolumeClaim) {
	pvc.Spec.VolumeName = "pv1"
	pvc.Status = v1.PersistentVolumeClaimStatus{
		Phase:       v1.ClaimBound,
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadWriteOncePod},
		Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("2Gi")},
	}
}

func TestDefaultPersistentVolumeClaim(t *testing.T) {
	pvc := &v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	r := PersistentVolumeClaimResource()
	r.PrepareForCreate(pvc)
	r.Default(pvc)
	want := &v1.PersistentVolumeClaim{
		Spec:   v1.PersistentVolumeClaimSpec{VolumeMode: svcPtr(v1.PersistentVolumeFilesystem)},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	if diff := cmp.Diff(want, pvc); diff != "" {
		t.Errorf("pvc (-want +got):\n%s", diff)
	}
}

func TestValidatePersistentVolumeClaim(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.PersistentVolumeClaim)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "access modes required", mutate: func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.AccessModes = nil },
			want: []string{"spec.accessModes: Required value: at least 1 access mode is required"}},
		{name: "storage required", mutate: func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.Resources.Requests = nil },
			want: []string{"spec.resources[storage]: Required value"}},
		{name: "storage positive", mutate: func(pvc *v1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse("0")
		}, want: []string{`spec.resources[storage]: Invalid value: "0": must be greater than zero`}},
		{name: "selector", mutate: func(pvc *v1.PersistentVolumeClaim) {
			pvc.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}, want: []string{`spec.selector.matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`}},
	}
	r := PersistentVolumeClaimResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(makePVC(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePersistentVolumeClaimUpdate(t *testing.T) {
	grow := func(size string) func(*v1.PersistentVolumeClaim) {
		return func(pvc *v1.PersistentVolumeClaim) {
			pvc.Spec.Resources.Requests[v1.ResourceStorage] = resource.MustParse(size)
		}
	}
	tests := []struct {
		name       string
		old, new   *v1.PersistentVolumeClaim
		want       []string
		wantPrefix string
	}{
		{name: "binding sets volumeName once", old: makePVC(nil), new: makePVC(func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.VolumeName = "pv1" }), want: []string{}},
		{name: "bound claim grows", old: makePVC(pvcBound), new: makePVC(func(pvc *v1.PersistentVolumeClaim) { pvcBound(pvc); grow("5Gi")(pvc) }), want: []string{}},
		{name: "bound claim shrinks", old: makePVC(func(pvc *v1.PersistentVolumeClaim) { pvcBound(pvc); grow("5Gi")(pvc) }),
			new:  makePVC(func(pvc *v1.PersistentVolumeClaim) { pvcBound(pvc); grow("3Gi")(pvc) }),
			want: []string{"spec.resources.requests.storage: Forbidden: field can not be less than previous value"}},
		{name: "rebinding", old: makePVC(pvcBound), new: makePVC(func(pvc *v1.PersistentVolumeClaim) { pvcBound(pvc); pvc.Spec.VolumeName = "pv2" }),
			wantPrefix: "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"},
		{name: "unbound claim may not resize", old: makePVC(nil), new: makePVC(grow("5Gi")),
			wantPrefix: "spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"},
		{name: "access modes", old: makePVC(nil), new: makePVC(func(pvc *v1.PersistentVolumeClaim) {
			pvc.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}
		}), wantPrefix: "spec: Forbidden: spec is immutable after creation"},
	}
	r := PersistentVolumeClaimResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := svcErrs(r.ValidateUpdate(tc.new, tc.old))
			if tc.wantPrefix != "" {
				if len(got) != 1 || !strings.HasPrefix(got[0], tc.wantPrefix) {
					t.Errorf("errors = %q, want one starting with %q", got, tc.wantPrefix)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPersistentVolumeClaimRow(t *testing.T) {
	tests := []struct {
		name string
		pvc  *v1.PersistentVolumeClaim
		want []interface{}
	}{{
		name: "pending",
		pvc:  makePVC(func(pvc *v1.PersistentVolumeClaim) { pvc.Spec.StorageClassName = svcPtr("standard") }),
		want: []interface{}{"data", "Pending", "", "", "", "standard", "<unset>", "5m", "Filesystem"},
	}, {
		name: "bound",
		pvc: makePVC(func(pvc *v1.PersistentVolumeClaim) {
			pvcBound(pvc)
			pvc.Status.CurrentVolumeAttributesClassName = svcPtr("gold")
		}),
		want: []interface{}{"data", "Bound", "pv1", "2Gi", "RWO,RWOP", "", "gold", "5m", "Filesystem"},
	}, {
		name: "terminating",
		pvc: makePVC(func(pvc *v1.PersistentVolumeClaim) {
			pvc.DeletionTimestamp = &svcTestCreated
			pvc.Spec.VolumeMode = nil
		}),
		want: []interface{}{"data", "Terminating", "", "", "", "", "<unset>", "5m", "<unset>"},
	}}
	r := PersistentVolumeClaimResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Row(tc.pvc, svcTestNow)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPersistentVolumeClaimStatus(t *testing.T) {
	pvc := makePVC(func(pvc *v1.PersistentVolumeClaim) {
		pvc.Status.AccessModes = []v1.PersistentVolumeAccessMode{"Sometimes"}
		pvc.Status.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("-1Gi")}
	})
	want := []string{
		`status.accessModes: Unsupported value: "Sometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`,
		`status.capacity[storage]: Invalid value: "-1Gi": must be greater than or equal to 0`,
	}
	if diff := cmp.Diff(want, svcErrs(PersistentVolumeClaimResource().Status.ValidateUpdate(pvc, makePVC(nil)))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

func TestPVCUpdateAllowsRetroactiveDefaultClass(t *testing.T) {
	old := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n", ResourceVersion: "1"},
		Spec: v1.PersistentVolumeClaimSpec{AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources: v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}}}}
	DefaultPersistentVolumeClaim(old)
	withClass := old.DeepCopy()
	class := "local"
	withClass.Spec.StorageClassName = &class
	if errs := ValidatePersistentVolumeClaimUpdate(withClass, old); len(errs) > 0 {
		t.Fatalf("setting a class on an unbound claim without one: %v", errs)
	}
	other := "fast"
	changed := withClass.DeepCopy()
	changed.Spec.StorageClassName = &other
	if errs := ValidatePersistentVolumeClaimUpdate(changed, withClass); len(errs) == 0 {
		t.Fatal("changing an existing class must be refused")
	}
}
