package localpv

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Names this controller serves and the annotations it writes, as
// Kubernetes spells them.
const (
	// ClassName is the StorageClass EnsureStorageClass creates.
	ClassName = "local"
	// Provisioner is the provisioner of ClassName, recorded on every PV
	// this controller creates.
	Provisioner = "tranche.dev/local"

	annDefaultClass           = "storageclass.kubernetes.io/is-default-class"
	annBetaDefaultClass       = "storageclass.beta.kubernetes.io/is-default-class"
	annBindCompleted          = "pv.kubernetes.io/bind-completed"
	annBoundByController      = "pv.kubernetes.io/bound-by-controller"
	annStorageProvisioner     = "volume.kubernetes.io/storage-provisioner"
	annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	annProvisionedBy          = "pv.kubernetes.io/provisioned-by"
)

// Event reasons, as Kubernetes' persistent volume controller records them.
const (
	reasonProvisioningSucceeded = "ProvisioningSucceeded"
	reasonProvisioningFailed    = "ProvisioningFailed"
	reasonClaimLost             = "ClaimLost"
)

// event is one Event to record on the claim.
type event struct {
	Type, Reason, Message string
}

// claimPlan is what one claim needs; the zero value means nothing.
type claimPlan struct {
	// SetClass, when set, is the default class to write into the claim's
	// nil spec.storageClassName; nothing else is done in that pass.
	SetClass string
	// CreatePV is a volume to provision: its directory, then the object.
	CreatePV *v1.PersistentVolume
	// BindPV sets the volume's status.phase to Bound.
	BindPV bool
	// Claim is the claim with its volumeName and binding annotations set,
	// when they differ.
	Claim *v1.PersistentVolumeClaim
	// ClaimStatus is the claim's new status, when it differs.
	ClaimStatus *v1.PersistentVolumeClaimStatus
	// Event is recorded on the claim.
	Event *event
}

// volumeAction is what a PV whose claim is gone needs.
type volumeAction int

const (
	volumeKeep volumeAction = iota
	// volumeRelease sets status.phase Released (reclaim policy Retain).
	volumeRelease
	// volumeDelete removes the directory and the PV (policy Delete).
	volumeDelete
)

// pvName is the name of the volume provisioned for claim, as Kubernetes'
// provisioners name it.
func pvName(claim *v1.PersistentVolumeClaim) string {
	return "pvc-" + string(claim.UID)
}

// defaultClass returns the default StorageClass, or nil: among the
// classes annotated as default, the newest, then the first by name, as
// Kubernetes chooses.
func defaultClass(classes []*storagev1.StorageClass) *storagev1.StorageClass {
	var best *storagev1.StorageClass
	for _, c := range classes {
		if c == nil || (c.Annotations[annDefaultClass] != "true" && c.Annotations[annBetaDefaultClass] != "true") {
			continue
		}
		if best == nil || c.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(c.CreationTimestamp.Equal(&best.CreationTimestamp) && c.Name < best.Name) {
			best = c
		}
	}
	return best
}

// planClaim decides what claim needs. pv is the volume named pvName(claim)
// or nil; classes are all StorageClasses; pvRoot is where directories go.
//
// A claim with a nil storageClassName gets the default class written in
// when that class is ours and the claim is not bound: Kubernetes'
// DefaultStorageClass admission does this at creation, which tranche's
// API server does not, so the controller does it after the fact (the
// rule Kubernetes' retroactive default class assignment follows). Claims
// of other classes, pre-bound to other volumes, or being deleted are left
// alone.
func planClaim(claim *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, classes []*storagev1.StorageClass, pvRoot string) claimPlan {
	if claim == nil || claim.DeletionTimestamp != nil {
		return claimPlan{}
	}
	if claim.Spec.StorageClassName == nil {
		if def := defaultClass(classes); def != nil && def.Provisioner == Provisioner && claim.Spec.VolumeName == "" {
			return claimPlan{SetClass: def.Name}
		}
		return claimPlan{}
	}
	idx := slices.IndexFunc(classes, func(c *storagev1.StorageClass) bool { return c != nil && c.Name == *claim.Spec.StorageClassName })
	if idx < 0 || classes[idx].Provisioner != Provisioner {
		return claimPlan{}
	}
	class := classes[idx]
	if claim.Spec.VolumeName != "" && claim.Spec.VolumeName != pvName(claim) {
		return claimPlan{}
	}

	var plan claimPlan
	if pv == nil {
		if claim.Spec.VolumeName != "" {
			if claim.Status.Phase == v1.ClaimLost {
				return claimPlan{}
			}
			status := claim.Status.DeepCopy()
			status.Phase = v1.ClaimLost
			return claimPlan{ClaimStatus: status, Event: &event{v1.EventTypeWarning, reasonClaimLost, "Bound claim has lost its PersistentVolume. Data on the volume is lost!"}}
		}
		if mode := class.VolumeBindingMode; mode != nil && *mode == storagev1.VolumeBindingWaitForFirstConsumer {
			return claimPlan{}
		}
		if msg := unsupported(claim); msg != "" {
			return claimPlan{Event: &event{v1.EventTypeWarning, reasonProvisioningFailed, msg}}
		}
		pv = newVolume(claim, class, pvRoot)
		plan.CreatePV = pv
		plan.Event = &event{v1.EventTypeNormal, reasonProvisioningSucceeded,
			fmt.Sprintf("Successfully provisioned volume %s using %s", pv.Name, Provisioner)}
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != claim.UID {
		return claimPlan{}
	}

	plan.BindPV = pv.Status.Phase != v1.VolumeBound
	bound := claim.DeepCopy()
	if bound.Annotations == nil {
		bound.Annotations = map[string]string{}
	}
	bound.Annotations[annBindCompleted] = "yes"
	bound.Annotations[annBoundByController] = "yes"
	bound.Annotations[annStorageProvisioner] = Provisioner
	bound.Annotations[annBetaStorageProvisioner] = Provisioner
	bound.Spec.VolumeName = pv.Name
	if !apiequality.Semantic.DeepEqual(bound.ObjectMeta, claim.ObjectMeta) || bound.Spec.VolumeName != claim.Spec.VolumeName {
		plan.Claim = bound
	}
	status := claim.Status.DeepCopy()
	status.Phase = v1.ClaimBound
	status.AccessModes = pv.Spec.AccessModes
	status.Capacity = pv.Spec.Capacity
	if !apiequality.Semantic.DeepEqual(*status, claim.Status) {
		plan.ClaimStatus = status
	}
	return plan
}

// unsupported says why claim cannot be provisioned here, or "".
func unsupported(claim *v1.PersistentVolumeClaim) string {
	switch {
	case claim.Spec.Selector != nil:
		return "claim Selector is not supported"
	case claim.Spec.VolumeMode != nil && *claim.Spec.VolumeMode == v1.PersistentVolumeBlock:
		return fmt.Sprintf("%s does not support block volume provisioning", Provisioner)
	case claim.Spec.DataSource != nil || claim.Spec.DataSourceRef != nil:
		return fmt.Sprintf("%s does not support volume data sources", Provisioner)
	}
	if q, ok := claim.Spec.Resources.Requests[v1.ResourceStorage]; !ok || q.IsZero() {
		return "claim has no storage request: set spec.resources.requests.storage"
	}
	return ""
}

// newVolume is the PV provisioned for claim: a directory pvRoot/<name>
// with the claim's size and access modes, pre-bound to the claim.
func newVolume(claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass, pvRoot string) *v1.PersistentVolume {
	name := pvName(claim)
	policy := v1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		policy = *class.ReclaimPolicy
	}
	return &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{annProvisionedBy: Provisioner},
		},
		Spec: v1.PersistentVolumeSpec{
			Capacity:    v1.ResourceList{v1.ResourceStorage: claim.Spec.Resources.Requests[v1.ResourceStorage]},
			AccessModes: slices.Clone(claim.Spec.AccessModes),
			PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{
				Path: filepath.Join(pvRoot, name),
				Type: ptr.To(v1.HostPathDirectoryOrCreate),
			}},
			ClaimRef: &v1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, ResourceVersion: claim.ResourceVersion,
			},
			PersistentVolumeReclaimPolicy: policy,
			StorageClassName:              class.Name,
			MountOptions:                  slices.Clone(class.MountOptions),
			VolumeMode:                    ptr.To(v1.PersistentVolumeFilesystem),
		},
	}
}

// planVolume decides what a PV of this provisioner needs once its claim
// is gone. claim is the claim its claimRef names as the API has it now
// (nil when deleted); a claim with another UID is a new claim of the same
// name, so the old one is gone too.
func planVolume(pv *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) volumeAction {
	if pv == nil || pv.DeletionTimestamp != nil || pv.Annotations[annProvisionedBy] != Provisioner || pv.Spec.ClaimRef == nil {
		return volumeKeep
	}
	if claim != nil && claim.UID == pv.Spec.ClaimRef.UID {
		return volumeKeep
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete {
		return volumeDelete
	}
	if pv.Status.Phase != v1.VolumeReleased {
		return volumeRelease
	}
	return volumeKeep
}

// ownedDir returns the PV's directory when it lies inside pvRoot, so that
// deleting a volume can never remove anything else.
func ownedDir(pv *v1.PersistentVolume, pvRoot string) (string, bool) {
	if pv.Spec.HostPath == nil || pvRoot == "" {
		return "", false
	}
	rel, err := filepath.Rel(pvRoot, pv.Spec.HostPath.Path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.Contains(rel, "/") {
		return "", false
	}
	return pv.Spec.HostPath.Path, true
}
