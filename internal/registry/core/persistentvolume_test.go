package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// makePV returns a valid, defaulted 1Gi hostPath volume "pv1", after mutate.
func makePV(mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv1", CreationTimestamp: svcTestCreated},
		Spec: v1.PersistentVolumeSpec{
			Capacity:               v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data/pv1"}},
		},
	}
	DefaultPersistentVolume(pv)
	if mutate != nil {
		mutate(pv)
	}
	return pv
}

func TestDefaultPersistentVolume(t *testing.T) {
	pv := &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}
	r := PersistentVolumeResource()
	r.PrepareForCreate(pv)
	r.Default(pv)
	want := &v1.PersistentVolume{
		Spec: v1.PersistentVolumeSpec{
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimRetain,
			VolumeMode:                    svcPtr(v1.PersistentVolumeFilesystem),
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x", Type: svcPtr(v1.HostPathUnset)}},
		},
		Status: v1.PersistentVolumeStatus{Phase: v1.VolumePending},
	}
	if diff := cmp.Diff(want, pv); diff != "" {
		t.Errorf("pv (-want +got):\n%s", diff)
	}
}

func TestValidatePersistentVolume(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.PersistentVolume)
		want   []string
	}{
		{name: "valid", want: []string{}},
		{name: "access modes required", mutate: func(pv *v1.PersistentVolume) { pv.Spec.AccessModes = nil },
			want: []string{"spec.accessModes: Required value"}},
		{name: "access mode values", mutate: func(pv *v1.PersistentVolume) {
			pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{"ReadSometimes", v1.ReadWriteOncePod}
		}, want: []string{
			`spec.accessModes: Unsupported value: "ReadSometimes": supported values: "ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"`,
			"spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
		}},
		{name: "capacity required", mutate: func(pv *v1.PersistentVolume) { pv.Spec.Capacity = nil },
			want: []string{"spec.capacity: Required value", `spec.capacity: Unsupported value: null: supported values: "storage"`}},
		{name: "capacity is storage only", mutate: func(pv *v1.PersistentVolume) { pv.Spec.Capacity[v1.ResourceCPU] = resource.MustParse("1") },
			want: []string{`spec.capacity: Unsupported value: {"cpu":"1","storage":"1Gi"}: supported values: "storage"`}},
		{name: "reclaim policy", mutate: func(pv *v1.PersistentVolume) { pv.Spec.PersistentVolumeReclaimPolicy = "Keep" },
			want: []string{`spec.persistentVolumeReclaimPolicy: Unsupported value: "Keep": supported values: "Delete", "Recycle", "Retain"`}},
		{name: "volume mode", mutate: func(pv *v1.PersistentVolume) { pv.Spec.VolumeMode = svcPtr(v1.PersistentVolumeMode("Raw")) },
			want: []string{`spec.volumeMode: Unsupported value: "Raw": supported values: "Block", "Filesystem"`}},
		{name: "no source", mutate: func(pv *v1.PersistentVolume) { pv.Spec.PersistentVolumeSource = v1.PersistentVolumeSource{} },
			want: []string{"spec: Required value: must specify a volume type"}},
		{name: "two sources", mutate: func(pv *v1.PersistentVolume) {
			pv.Spec.NFS = &v1.NFSVolumeSource{Server: "nfs.example.com", Path: "/exports"}
		}, want: []string{"spec.nfs: Forbidden: may not specify more than 1 volume type"}},
		{name: "host path required", mutate: func(pv *v1.PersistentVolume) { pv.Spec.HostPath.Path = "" },
			want: []string{"spec.hostPath.path: Required value"}},
		{name: "host path backsteps", mutate: func(pv *v1.PersistentVolume) { pv.Spec.HostPath.Path = "/data/../etc" },
			want: []string{`spec.hostPath.path: Invalid value: "/data/../etc": must not contain '..'`}},
		{name: "local needs node affinity", mutate: func(pv *v1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.Local = nil, &v1.LocalVolumeSource{Path: "/mnt/disk"}
		}, want: []string{"metadata.annotations: Required value: Local volume requires node affinity"}},
		{name: "csi", mutate: func(pv *v1.PersistentVolume) { pv.Spec.HostPath, pv.Spec.CSI = nil, &v1.CSIPersistentVolumeSource{} },
			want: []string{"spec.csi.driver: Required value", "spec.csi.volumeHandle: Required value"}},
		{name: "nfs path", mutate: func(pv *v1.PersistentVolume) {
			pv.Spec.HostPath, pv.Spec.NFS = nil, &v1.NFSVolumeSource{Server: "nfs", Path: "exports"}
		}, want: []string{`spec.nfs.path: Invalid value: "exports": must be an absolute path`}},
		{name: "storage class", mutate: func(pv *v1.PersistentVolume) { pv.Spec.StorageClassName = "Fast" },
			want: []string{`spec.storageClassName: Invalid value: "Fast": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
	}
	r := PersistentVolumeResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, svcErrs(r.Validate(makePV(tc.mutate)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidatePersistentVolumeUpdate(t *testing.T) {
	r := PersistentVolumeResource()
	grown := makePV(func(pv *v1.PersistentVolume) {
		pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("2Gi")
		pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "default", Name: "data"}
	})
	if errs := r.ValidateUpdate(grown, makePV(nil)); len(errs) != 0 {
		t.Errorf("capacity and claimRef may change: %v", errs)
	}
	moved := makePV(func(pv *v1.PersistentVolume) { pv.Spec.HostPath.Path = "/elsewhere" })
	errs := svcErrs(r.ValidateUpdate(moved, makePV(nil)))
	if len(errs) != 1 || !strings.HasPrefix(errs[0], "spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n") {
		t.Errorf("source change: %q", errs)
	}
	block := makePV(func(pv *v1.PersistentVolume) { pv.Spec.VolumeMode = svcPtr(v1.PersistentVolumeBlock) })
	if diff := cmp.Diff([]string{`volumeMode: Invalid value: "Block": field is immutable`}, svcErrs(r.ValidateUpdate(block, makePV(nil)))); diff != "" {
		t.Errorf("volume mode change (-want +got):\n%s", diff)
	}
}

func TestPersistentVolumeRow(t *testing.T) {
	tests := []struct {
		name string
		pv   *v1.PersistentVolume
		want []interface{}
	}{{
		name: "available",
		pv:   makePV(func(pv *v1.PersistentVolume) { pv.Status.Phase = v1.VolumeAvailable }),
		want: []interface{}{"pv1", "1Gi", "RWO", "Retain", "Available", "", "", "<unset>", "", "5m", "Filesystem"},
	}, {
		name: "bound, several modes, class from the beta annotation",
		pv: makePV(func(pv *v1.PersistentVolume) {
			pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadOnlyMany, v1.ReadWriteOnce, v1.ReadWriteOnce}
			pv.Spec.ClaimRef = &v1.ObjectReference{Namespace: "default", Name: "data"}
			pv.Spec.StorageClassName = "standard"
			pv.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": "legacy"}
			pv.Spec.VolumeAttributesClassName = svcPtr("gold")
			pv.Status.Phase = v1.VolumeBound
		}),
		want: []interface{}{"pv1", "1Gi", "RWO,ROX,RWX", "Retain", "Bound", "default/data", "legacy", "gold", "", "5m", "Filesystem"},
	}, {
		name: "terminating without capacity",
		pv: makePV(func(pv *v1.PersistentVolume) {
			pv.Spec.Capacity = nil
			pv.Spec.VolumeMode = nil
			pv.Status.Reason = "Failed"
			pv.DeletionTimestamp = &svcTestCreated
		}),
		want: []interface{}{"pv1", "0", "RWO", "Retain", "Terminating", "", "", "<unset>", "Failed", "5m", "<unset>"},
	}}
	r := PersistentVolumeResource()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.Row(tc.pv, svcTestNow)); diff != "" {
				t.Errorf("row (-want +got):\n%s", diff)
			}
		})
	}
	if r.Namespaced || r.Status == nil || r.ShortNames[0] != "pv" || len(r.Columns) != 11 {
		t.Errorf("identity: %+v", r)
	}
}
