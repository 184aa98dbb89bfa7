package localpv

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const pvRoot = "/data/pv"

func makeClaim(mutate func(*v1.PersistentVolumeClaim)) *v1.PersistentVolumeClaim {
	c := &v1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", UID: "u1", ResourceVersion: "5"},
		Spec: v1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(ClassName),
			AccessModes:      []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			Resources:        v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func makeClass(name, provisioner string, mutate func(*storagev1.StorageClass)) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name},
		Provisioner:       provisioner,
		ReclaimPolicy:     ptr.To(v1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if mutate != nil {
		mutate(sc)
	}
	return sc
}

func asDefault(sc *storagev1.StorageClass) {
	sc.Annotations = map[string]string{annDefaultClass: "true"}
}

// wantVolume is the PV provisioned for makeClaim(nil) with a mutation.
func wantVolume(mutate func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-u1", Annotations: map[string]string{annProvisionedBy: Provisioner}},
		Spec: v1.PersistentVolumeSpec{
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource:        v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/data/pv/pvc-u1", Type: ptr.To(v1.HostPathDirectoryOrCreate)}},
			ClaimRef:                      &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "ns", Name: "data", UID: "u1", ResourceVersion: "5"},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              ClassName,
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
		},
	}
	if mutate != nil {
		mutate(pv)
	}
	return pv
}

func boundClaim(c *v1.PersistentVolumeClaim) {
	c.Annotations = map[string]string{
		annBindCompleted: "yes", annBoundByController: "yes",
		annStorageProvisioner: Provisioner, annBetaStorageProvisioner: Provisioner,
	}
	c.Spec.VolumeName = "pvc-u1"
}

func boundStatus() *v1.PersistentVolumeClaimStatus {
	return &v1.PersistentVolumeClaimStatus{
		Phase:       v1.ClaimBound,
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Capacity:    v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
	}
}

func TestPlanClaim(t *testing.T) {
	local := makeClass(ClassName, Provisioner, asDefault)
	other := makeClass("fast", "example.com/fast", nil)
	cases := []struct {
		name    string
		claim   *v1.PersistentVolumeClaim
		pv      *v1.PersistentVolume
		classes []*storagev1.StorageClass
		want    claimPlan
	}{
		{
			name:    "new claim is provisioned and bound",
			claim:   makeClaim(nil),
			classes: []*storagev1.StorageClass{local, other},
			want: claimPlan{
				CreatePV:    wantVolume(nil),
				BindPV:      true,
				Claim:       makeClaim(boundClaim),
				ClaimStatus: boundStatus(),
				Event:       &event{"Normal", "ProvisioningSucceeded", "Successfully provisioned volume pvc-u1 using tranche.dev/local"},
			},
		},
		{
			name: "Retain class and multiple access modes carry over",
			claim: makeClaim(func(c *v1.PersistentVolumeClaim) {
				c.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany}
			}),
			classes: []*storagev1.StorageClass{makeClass(ClassName, Provisioner, func(sc *storagev1.StorageClass) {
				sc.ReclaimPolicy = ptr.To(v1.PersistentVolumeReclaimRetain)
			})},
			want: claimPlan{
				CreatePV: wantVolume(func(pv *v1.PersistentVolume) {
					pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
					pv.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany}
				}),
				BindPV: true,
				Claim: makeClaim(func(c *v1.PersistentVolumeClaim) {
					boundClaim(c)
					c.Spec.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany}
				}),
				ClaimStatus: func() *v1.PersistentVolumeClaimStatus {
					s := boundStatus()
					s.AccessModes = []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce, v1.ReadOnlyMany}
					return s
				}(),
				Event: &event{"Normal", "ProvisioningSucceeded", "Successfully provisioned volume pvc-u1 using tranche.dev/local"},
			},
		},
		{
			name:    "nil class gets the default class first",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil }),
			classes: []*storagev1.StorageClass{other, local},
			want:    claimPlan{SetClass: ClassName},
		},
		{
			name:    "nil class without a default is left alone",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil }),
			classes: []*storagev1.StorageClass{makeClass(ClassName, Provisioner, nil)},
		},
		{
			name:  "nil class whose default is another provisioner's",
			claim: makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil }),
			classes: []*storagev1.StorageClass{local, makeClass("newer", "example.com/x", func(sc *storagev1.StorageClass) {
				asDefault(sc)
				sc.CreationTimestamp = metav1.NewTime(time.Now())
			})},
		},
		{
			name:    "empty class means no class",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }),
			classes: []*storagev1.StorageClass{local},
		},
		{
			name:    "other provisioner's class",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("fast") }),
			classes: []*storagev1.StorageClass{local, other},
		},
		{
			name:    "claim being deleted",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.DeletionTimestamp = ptr.To(metav1.Now()) }),
			classes: []*storagev1.StorageClass{local},
		},
		{
			name:    "selector is refused",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.Selector = &metav1.LabelSelector{} }),
			classes: []*storagev1.StorageClass{local},
			want:    claimPlan{Event: &event{"Warning", "ProvisioningFailed", "claim Selector is not supported"}},
		},
		{
			name:    "volume already created: bind only",
			claim:   makeClaim(nil),
			pv:      wantVolume(nil),
			classes: []*storagev1.StorageClass{local},
			want:    claimPlan{BindPV: true, Claim: makeClaim(boundClaim), ClaimStatus: boundStatus()},
		},
		{
			name:  "fully bound: nothing",
			claim: makeClaim(func(c *v1.PersistentVolumeClaim) { boundClaim(c); c.Status = *boundStatus() }),
			pv: wantVolume(func(pv *v1.PersistentVolume) {
				pv.Status.Phase = v1.VolumeBound
			}),
			classes: []*storagev1.StorageClass{local},
		},
		{
			name:    "bound claim whose volume vanished is Lost",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { boundClaim(c); c.Status = *boundStatus() }),
			classes: []*storagev1.StorageClass{local},
			want: claimPlan{
				ClaimStatus: func() *v1.PersistentVolumeClaimStatus { s := boundStatus(); s.Phase = v1.ClaimLost; return s }(),
				Event:       &event{"Warning", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the volume is lost!"},
			},
		},
		{
			name:    "claim pre-bound to another volume",
			claim:   makeClaim(func(c *v1.PersistentVolumeClaim) { c.Spec.VolumeName = "mine" }),
			classes: []*storagev1.StorageClass{local},
		},
		{
			name:  "WaitForFirstConsumer class waits",
			claim: makeClaim(nil),
			classes: []*storagev1.StorageClass{makeClass(ClassName, Provisioner, func(sc *storagev1.StorageClass) {
				sc.VolumeBindingMode = ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)
			})},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := planClaim(tc.claim, tc.pv, tc.classes, pvRoot)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanVolume(t *testing.T) {
	retain := func(pv *v1.PersistentVolume) {
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	}
	cases := []struct {
		name  string
		pv    *v1.PersistentVolume
		claim *v1.PersistentVolumeClaim
		want  volumeAction
	}{
		{"claim still there", wantVolume(nil), makeClaim(nil), volumeKeep},
		{"claim gone, Delete", wantVolume(nil), nil, volumeDelete},
		{"claim recreated with a new UID, Delete", wantVolume(nil), makeClaim(func(c *v1.PersistentVolumeClaim) { c.UID = "u2" }), volumeDelete},
		{"claim gone, Retain", wantVolume(retain), nil, volumeRelease},
		{"claim gone, Retain, already Released", wantVolume(func(pv *v1.PersistentVolume) { retain(pv); pv.Status.Phase = v1.VolumeReleased }), nil, volumeKeep},
		{"not provisioned here", wantVolume(func(pv *v1.PersistentVolume) { pv.Annotations = nil }), nil, volumeKeep},
		{"no claimRef", wantVolume(func(pv *v1.PersistentVolume) { pv.Spec.ClaimRef = nil }), nil, volumeKeep},
		{"being deleted", wantVolume(func(pv *v1.PersistentVolume) { pv.DeletionTimestamp = ptr.To(metav1.Now()) }), nil, volumeKeep},
		{"nil", nil, nil, volumeKeep},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := planVolume(tc.pv, tc.claim); got != tc.want {
				t.Errorf("planVolume = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOwnedDir(t *testing.T) {
	cases := []struct {
		path string
		want bool
	}{
		{"/data/pv/pvc-u1", true},
		{"/data/pv", false},
		{"/data/pv/a/b", false},
		{"/data/other", false},
		{"/data/pv/../x", false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			pv := wantVolume(func(pv *v1.PersistentVolume) { pv.Spec.HostPath.Path = tc.path })
			if _, got := ownedDir(pv, pvRoot); got != tc.want {
				t.Errorf("ownedDir = %v, want %v", got, tc.want)
			}
		})
	}
}
