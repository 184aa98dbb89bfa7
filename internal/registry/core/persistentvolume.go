package core

import (
	"fmt"
	"path"
	"reflect"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// Sorted value lists for "Unsupported value" errors.
var (
	pvAccessModes     = []string{"ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"}
	pvVolumeModes     = []string{"Block", "Filesystem"}
	pvReclaimPolicies = []string{"Delete", "Recycle", "Retain"}
	pvHostPathTypes   = []string{"", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"}
)

// pvBetaStorageClassAnnotation is the storage-class annotation that predates
// spec.storageClassName; printers still prefer it.
const pvBetaStorageClassAnnotation = "volume.beta.kubernetes.io/storage-class"

// PersistentVolumeResource returns the cluster-scoped core/v1 PersistentVolume resource
// with its status subresource, Kubernetes' defaults and validation, and kubectl's table.
func PersistentVolumeResource() registry.Resource {
	return registry.Resource{
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"},
		Plural:     "persistentvolumes",
		Singular:   "persistentvolume",
		ShortNames: []string{"pv"},
		Namespaced: false,
		New:        func() runtime.Object { return &v1.PersistentVolume{} },
		NewList:    func() runtime.Object { return &v1.PersistentVolumeList{} },
		PrepareForCreate: registry.Hook(func(pv *v1.PersistentVolume) {
			pv.Status = v1.PersistentVolumeStatus{}
		}),
		Default:        registry.Hook(DefaultPersistentVolume),
		Validate:       registry.Func(ValidatePersistentVolume),
		ValidateUpdate: registry.FuncUpdate(ValidatePersistentVolumeUpdate),
		Status:         &registry.StatusStrategy{},
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Capacity", Type: "string", Description: v1.PersistentVolumeSpec{}.SwaggerDoc()["capacity"]},
			{Name: "Access Modes", Type: "string", Description: v1.PersistentVolumeSpec{}.SwaggerDoc()["accessModes"]},
			{Name: "Reclaim Policy", Type: "string", Description: v1.PersistentVolumeSpec{}.SwaggerDoc()["persistentVolumeReclaimPolicy"]},
			{Name: "Status", Type: "string", Description: v1.PersistentVolumeStatus{}.SwaggerDoc()["phase"]},
			{Name: "Claim", Type: "string", Description: v1.PersistentVolumeSpec{}.SwaggerDoc()["claimRef"]},
			{Name: "StorageClass", Type: "string", Description: "StorageClass of the pv"},
			{Name: "VolumeAttributesClass", Type: "string", Description: "VolumeAttributesClass of the pv"},
			{Name: "Reason", Type: "string", Description: v1.PersistentVolumeStatus{}.SwaggerDoc()["reason"]},
			registry.AgeColumn,
			{Name: "VolumeMode", Type: "string", Priority: 1, Description: v1.PersistentVolumeSpec{}.SwaggerDoc()["volumeMode"]},
		},
		Row: registry.FuncWith(func(pv *v1.PersistentVolume, now time.Time) []interface{} {
			return pvRow(pv, now)
		}),
	}
}

// DefaultPersistentVolume sets phase Pending, reclaim policy Retain, volume mode
// Filesystem and an explicit empty hostPath type, as Kubernetes' defaulters do.
func DefaultPersistentVolume(pv *v1.PersistentVolume) {
	if pv == nil {
		return
	}
	if pv.Status.Phase == "" {
		pv.Status.Phase = v1.VolumePending
	}
	if pv.Spec.PersistentVolumeReclaimPolicy == "" {
		pv.Spec.PersistentVolumeReclaimPolicy = v1.PersistentVolumeReclaimRetain
	}
	if pv.Spec.VolumeMode == nil {
		m := v1.PersistentVolumeFilesystem
		pv.Spec.VolumeMode = &m
	}
	if hp := pv.Spec.HostPath; hp != nil && hp.Type == nil {
		t := v1.HostPathUnset
		hp.Type = &t
	}
}

// ValidatePersistentVolume checks a volume's spec: storage capacity, access modes,
// reclaim policy, class name, volume mode, and exactly one volume source (with the
// required fields of hostPath, local, nfs and csi).
func ValidatePersistentVolume(pv *v1.PersistentVolume) field.ErrorList {
	if pv == nil {
		return nil
	}
	var errs field.ErrorList
	spec := &pv.Spec
	specPath := field.NewPath("spec")
	errs = append(errs, pvValidateAccessModes(spec.AccessModes, specPath.Child("accessModes"), "")...)

	if len(spec.Capacity) == 0 {
		errs = append(errs, field.Required(specPath.Child("capacity"), ""))
	}
	if _, ok := spec.Capacity[v1.ResourceStorage]; !ok || len(spec.Capacity) > 1 {
		errs = append(errs, field.NotSupported(specPath.Child("capacity"), spec.Capacity, []string{string(v1.ResourceStorage)}))
	}
	for name, q := range spec.Capacity {
		if q.Value() < 0 {
			errs = append(errs, field.Invalid(specPath.Child("capacity").Key(string(name)), q.Value(), "must be a valid resource quantity"))
		}
	}
	if p := spec.PersistentVolumeReclaimPolicy; p != "" && !svcIn(string(p), pvReclaimPolicies) {
		errs = append(errs, field.NotSupported(specPath.Child("persistentVolumeReclaimPolicy"), p, pvReclaimPolicies))
	}
	if spec.StorageClassName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.StorageClassName, false) {
			errs = append(errs, field.Invalid(specPath.Child("storageClassName"), spec.StorageClassName, msg))
		}
	}
	if m := spec.VolumeMode; m != nil && !svcIn(string(*m), pvVolumeModes) {
		errs = append(errs, field.NotSupported(specPath.Child("volumeMode"), *m, pvVolumeModes))
	}
	errs = append(errs, pvValidateSource(pv, specPath)...)
	return errs
}

func pvValidateAccessModes(modes []v1.PersistentVolumeAccessMode, p *field.Path, requiredDetail string) field.ErrorList {
	var errs field.ErrorList
	if len(modes) == 0 {
		errs = append(errs, field.Required(p, requiredDetail))
	}
	rwop, other := false, false
	for _, m := range modes {
		if !svcIn(string(m), pvAccessModes) {
			errs = append(errs, field.NotSupported(p, m, pvAccessModes))
		}
		if m == v1.ReadWriteOncePod {
			rwop = true
		} else {
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// pvValidateSource counts the set volume sources through reflection, so a source added
// to the API later is counted without a code change.
func pvValidateSource(pv *v1.PersistentVolume, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	src := reflect.ValueOf(pv.Spec.PersistentVolumeSource)
	n := 0
	for i := 0; i < src.NumField(); i++ {
		if src.Field(i).IsNil() {
			continue
		}
		name := strings.Split(src.Type().Field(i).Tag.Get("json"), ",")[0]
		n++
		if n > 1 {
			errs = append(errs, field.Forbidden(specPath.Child(name), "may not specify more than 1 volume type"))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(specPath, "must specify a volume type"))
	}
	s := &pv.Spec.PersistentVolumeSource
	if hp := s.HostPath; hp != nil {
		p := specPath.Child("hostPath")
		if hp.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, pvValidateNoBacksteps(hp.Path, p.Child("path"))...)
		}
		if hp.Type != nil && !svcIn(string(*hp.Type), pvHostPathTypes) {
			errs = append(errs, field.NotSupported(p.Child("type"), *hp.Type, pvHostPathTypes))
		}
	}
	if l := s.Local; l != nil {
		p := specPath.Child("local")
		if l.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else {
			errs = append(errs, pvValidateNoBacksteps(l.Path, p.Child("path"))...)
		}
		if pv.Spec.NodeAffinity == nil {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations"), "Local volume requires node affinity"))
		}
	}
	if nfs := s.NFS; nfs != nil {
		p := specPath.Child("nfs")
		if nfs.Server == "" {
			errs = append(errs, field.Required(p.Child("server"), ""))
		}
		if nfs.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		} else if !path.IsAbs(nfs.Path) {
			errs = append(errs, field.Invalid(p.Child("path"), nfs.Path, "must be an absolute path"))
		}
	}
	if csi := s.CSI; csi != nil {
		p := specPath.Child("csi")
		if csi.Driver == "" {
			errs = append(errs, field.Required(p.Child("driver"), ""))
		}
		if csi.VolumeHandle == "" {
			errs = append(errs, field.Required(p.Child("volumeHandle"), ""))
		}
	}
	if na := pv.Spec.NodeAffinity; na != nil && na.Required == nil {
		errs = append(errs, field.Required(specPath.Child("nodeAffinity", "required"), "must specify required node constraints"))
	}
	return errs
}

// pvValidateNoBacksteps refuses ".." path elements, as Kubernetes does for host paths.
func pvValidateNoBacksteps(p string, fp *field.Path) field.ErrorList {
	for _, item := range strings.Split(p, "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fp, p, "must not contain '..'")}
		}
	}
	return nil
}

// ValidatePersistentVolumeUpdate checks an update: the volume source, volume mode and
// node affinity never change; the rest as on create.
func ValidatePersistentVolumeUpdate(pv, old *v1.PersistentVolume) field.ErrorList {
	if pv == nil || old == nil {
		return ValidatePersistentVolume(pv)
	}
	errs := ValidatePersistentVolume(pv)
	if !apiequality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, old.Spec.PersistentVolumeSource) {
		diff := cmp.Diff(old.Spec.PersistentVolumeSource, pv.Spec.PersistentVolumeSource)
		errs = append(errs, field.Forbidden(field.NewPath("spec", "persistentvolumesource"),
			fmt.Sprintf("spec.persistentvolumesource is immutable after creation\n%v", diff)))
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pv.Spec.VolumeMode, old.Spec.VolumeMode, field.NewPath("volumeMode"))...)
	if old.Spec.NodeAffinity != nil && !apiequality.Semantic.DeepEqual(pv.Spec.NodeAffinity, old.Spec.NodeAffinity) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "nodeAffinity"), pv.Spec.NodeAffinity,
			apivalidation.FieldImmutableErrorMsg+", except for updating from beta label to GA"))
	}
	return errs
}

// pvAccessModesString is kubectl's short form of access modes, in a fixed order.
func pvAccessModesString(modes []v1.PersistentVolumeAccessMode) string {
	has := map[v1.PersistentVolumeAccessMode]bool{}
	for _, m := range modes {
		has[m] = true
	}
	var out []string
	for _, m := range []struct {
		mode  v1.PersistentVolumeAccessMode
		short string
	}{{v1.ReadWriteOnce, "RWO"}, {v1.ReadOnlyMany, "ROX"}, {v1.ReadWriteMany, "RWX"}, {v1.ReadWriteOncePod, "RWOP"}} {
		if has[m.mode] {
			out = append(out, m.short)
		}
	}
	return strings.Join(out, ",")
}

func pvRow(pv *v1.PersistentVolume, now time.Time) []interface{} {
	claim := ""
	if ref := pv.Spec.ClaimRef; ref != nil {
		claim = ref.Namespace + "/" + ref.Name
	}
	capacity := pv.Spec.Capacity[v1.ResourceStorage]
	phase := string(pv.Status.Phase)
	if pv.DeletionTimestamp != nil {
		phase = "Terminating"
	}
	class := pv.Spec.StorageClassName
	if c, ok := pv.Annotations[pvBetaStorageClassAnnotation]; ok {
		class = c
	}
	vac := "<unset>"
	if pv.Spec.VolumeAttributesClassName != nil {
		vac = *pv.Spec.VolumeAttributesClassName
	}
	mode := "<unset>"
	if pv.Spec.VolumeMode != nil {
		mode = string(*pv.Spec.VolumeMode)
	}
	return []interface{}{pv.Name, capacity.String(), pvAccessModesString(pv.Spec.AccessModes),
		string(pv.Spec.PersistentVolumeReclaimPolicy), phase, claim, class, vac, pv.Status.Reason,
		registry.HumanAge(pv.CreationTimestamp, now), mode}
}
