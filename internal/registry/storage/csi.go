package storage

import (
	"fmt"
	"strings"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/tranche/tranche/internal/registry"
)

// csiNodeIDMaxLength bounds a CSINode driver's nodeID.
const csiNodeIDMaxLength = 256

var supportedFSGroupPolicies = []string{string(storagev1.FileFSGroupPolicy), string(storagev1.NoneFSGroupPolicy), string(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)}

// CSIDriverResource serves storage.k8s.io/v1 csidrivers: cluster-scoped, named by the
// driver, defaulted as storage/v1 does (attachRequired true, podInfoOnMount,
// storageCapacity, requiresRepublish, seLinuxMount and preventPodSchedulingIfMissing
// false, fsGroupPolicy ReadWriteOnceWithFSType, volumeLifecycleModes [Persistent]),
// attachRequired and volumeLifecycleModes immutable, generation bumped by spec changes;
// the NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS REQUIRESREPUBLISH
// MODES AGE table.
func CSIDriverResource() registry.Resource {
	desc := storagev1.CSIDriverSpec{}.SwaggerDoc()
	return registry.Strategy[*storagev1.CSIDriver]{
		Default: DefaultCSIDriver,
		Validate: func(d *storagev1.CSIDriver) field.ErrorList {
			return validateCSIDriverSpec(&d.Spec, field.NewPath("spec"))
		},
		ValidateUpdate: func(d, old *storagev1.CSIDriver) field.ErrorList {
			errs := validateCSIDriverSpec(&d.Spec, field.NewPath("spec"))
			// "attachedRequired" is upstream's spelling of the path.
			errs = append(errs, apivalidation.ValidateImmutableField(d.Spec.AttachRequired, old.Spec.AttachRequired, field.NewPath("spec", "attachedRequired"))...)
			return append(errs, apivalidation.ValidateImmutableField(d.Spec.VolumeLifecycleModes, old.Spec.VolumeLifecycleModes, field.NewPath("spec", "volumeLifecycleModes"))...)
		},
		Row: func(d *storagev1.CSIDriver, now time.Time) []interface{} {
			tokenRequests := "<unset>"
			if d.Spec.TokenRequests != nil {
				var audiences []string
				for _, t := range d.Spec.TokenRequests {
					audiences = append(audiences, t.Audience)
				}
				tokenRequests = strings.Join(audiences, ",")
			}
			var modes []string
			for _, m := range d.Spec.VolumeLifecycleModes {
				modes = append(modes, string(m))
			}
			modeCell := strings.Join(modes, ",")
			if modeCell == "" {
				modeCell = "<none>"
			}
			return []interface{}{d.Name, boolOr(d.Spec.AttachRequired, true), boolOr(d.Spec.PodInfoOnMount, false),
				boolOr(d.Spec.StorageCapacity, false), tokenRequests, boolOr(d.Spec.RequiresRepublish, false), modeCell,
				registry.HumanAge(d.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:             storagev1.SchemeGroupVersion.WithKind("CSIDriver"),
		Plural:          "csidrivers",
		Singular:        "csidriver",
		New:             func() runtime.Object { return &storagev1.CSIDriver{} },
		NewList:         func() runtime.Object { return &storagev1.CSIDriverList{} },
		TrackGeneration: true,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "AttachRequired", Type: "boolean", Description: desc["attachRequired"]},
			{Name: "PodInfoOnMount", Type: "boolean", Description: desc["podInfoOnMount"]},
			{Name: "StorageCapacity", Type: "boolean", Description: desc["storageCapacity"]},
			{Name: "TokenRequests", Type: "string", Description: desc["tokenRequests"]},
			{Name: "RequiresRepublish", Type: "boolean", Description: desc["requiresRepublish"]},
			{Name: "Modes", Type: "string", Description: desc["volumeLifecycleModes"]},
			registry.AgeColumn,
		},
	})
}

func boolOr(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

func ptrTo[T any](v T) *T { return &v }

// DefaultCSIDriver fills storage/v1's CSIDriver defaults, with the feature gates of
// Kubernetes 1.37 (SELinuxMountReadWriteOncePod GA, VolumeLimitScaling beta on).
func DefaultCSIDriver(d *storagev1.CSIDriver) {
	s := &d.Spec
	if s.AttachRequired == nil {
		s.AttachRequired = new(true)
	}
	if s.PodInfoOnMount == nil {
		s.PodInfoOnMount = new(false)
	}
	if s.StorageCapacity == nil {
		s.StorageCapacity = new(false)
	}
	if s.FSGroupPolicy == nil {
		s.FSGroupPolicy = new(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy)
	}
	if len(s.VolumeLifecycleModes) == 0 {
		s.VolumeLifecycleModes = []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	}
	if s.RequiresRepublish == nil {
		s.RequiresRepublish = new(false)
	}
	if s.SELinuxMount == nil {
		s.SELinuxMount = new(false)
	}
	if s.PreventPodSchedulingIfMissing == nil {
		s.PreventPodSchedulingIfMissing = new(false)
	}
}

// validateCSIDriverSpec is Kubernetes' check of a CSIDriver's spec after defaulting.
func validateCSIDriverSpec(s *storagev1.CSIDriverSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, req := range []struct {
		name string
		set  bool
	}{
		{"attachedRequired", s.AttachRequired != nil}, {"podInfoOnMount", s.PodInfoOnMount != nil},
		{"storageCapacity", s.StorageCapacity != nil},
	} {
		if !req.set {
			errs = append(errs, field.Required(fldPath.Child(req.name), ""))
		}
	}
	if p := s.FSGroupPolicy; p != nil && !sets.New(supportedFSGroupPolicies...).Has(string(*p)) {
		errs = append(errs, field.NotSupported(fldPath.Child("fsGroupPolicy"), p, supportedFSGroupPolicies))
	}
	audiences := map[string]bool{}
	for i, tr := range s.TokenRequests {
		p := fldPath.Child("tokenRequests").Index(i)
		if audiences[tr.Audience] {
			errs = append(errs, field.Duplicate(p.Child("audience"), tr.Audience))
			continue
		}
		audiences[tr.Audience] = true
		if e := tr.ExpirationSeconds; e != nil {
			if *e < int64((10 * time.Minute).Seconds()) {
				errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, "may not specify a duration less than 10 minutes"))
			}
			if *e > 1<<32 {
				errs = append(errs, field.Invalid(p.Child("expirationSeconds"), *e, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	for _, m := range s.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(fldPath.Child("volumeLifecycleModes"), m,
				[]string{string(storagev1.VolumeLifecyclePersistent), string(storagev1.VolumeLifecycleEphemeral)}))
		}
	}
	if s.SELinuxMount == nil {
		errs = append(errs, field.Required(fldPath.Child("seLinuxMount"), ""))
	}
	if p := s.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		errs = append(errs, field.Invalid(fldPath.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	if s.ServiceAccountTokenInSecrets != nil && len(s.TokenRequests) == 0 {
		errs = append(errs, field.Invalid(fldPath.Child("serviceAccountTokenInSecrets"), s.ServiceAccountTokenInSecrets, "serviceAccountTokenInSecrets is set but no tokenRequests are specified"))
	}
	if s.PreventPodSchedulingIfMissing == nil {
		errs = append(errs, field.Required(fldPath.Child("preventPodSchedulingIfMissing"), ""))
	}
	return errs
}

// CSINodeResource serves storage.k8s.io/v1 csinodes: cluster-scoped, named as a node,
// listing the CSI drivers a node runs (each named once, with a nodeID, valid topology
// keys and a non-negative allocatable count; only a driver's count may change); the
// NAME DRIVERS AGE table.
func CSINodeResource() registry.Resource {
	return registry.Strategy[*storagev1.CSINode]{
		Validate: func(n *storagev1.CSINode) field.ErrorList {
			return validateCSINodeDrivers(n.Spec.Drivers, field.NewPath("spec", "drivers"))
		},
		ValidateUpdate: func(n, old *storagev1.CSINode) field.ErrorList {
			errs := validateCSINodeDrivers(n.Spec.Drivers, field.NewPath("spec", "drivers"))
			for _, o := range old.Spec.Drivers {
				for _, d := range n.Spec.Drivers {
					if o.Name != d.Name {
						continue
					}
					o, d := o.DeepCopy(), d.DeepCopy()
					o.Allocatable, d.Allocatable = nil, nil
					errs = append(errs, apivalidation.ValidateImmutableField(*d, *o, field.NewPath("spec", "drivers"))...)
				}
			}
			return errs
		},
		Row: func(n *storagev1.CSINode, now time.Time) []interface{} {
			return []interface{}{n.Name, int64(len(n.Spec.Drivers)), registry.HumanAge(n.CreationTimestamp, now)}
		},
	}.Apply(registry.Resource{
		GVK:            storagev1.SchemeGroupVersion.WithKind("CSINode"),
		Plural:         "csinodes",
		Singular:       "csinode",
		New:            func() runtime.Object { return &storagev1.CSINode{} },
		NewList:        func() runtime.Object { return &storagev1.CSINodeList{} },
		NameValidation: apivalidation.NameIsDNSSubdomain,
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "Drivers", Type: "integer", Description: "Drivers indicates the number of CSI drivers registered on the node"},
			registry.AgeColumn,
		},
	})
}

func validateCSINodeDrivers(drivers []storagev1.CSINodeDriver, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, d := range drivers {
		p := fldPath.Index(i)
		errs = append(errs, ValidateCSIDriverName(d.Name, p.Child("name"))...)
		if d.NodeID == "" {
			errs = append(errs, field.Required(p.Child("nodeID"), d.NodeID))
		}
		if len(d.NodeID) > csiNodeIDMaxLength {
			errs = append(errs, field.Invalid(p.Child("nodeID"), d.NodeID, fmt.Sprintf("must be %d characters or less", csiNodeIDMaxLength)))
		}
		if a := d.Allocatable; a != nil && a.Count != nil {
			errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*a.Count), p.Child("allocatable", "count"))...)
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), d.Name))
		}
		names.Insert(d.Name)
		keys := sets.New[string]()
		for _, key := range d.TopologyKeys {
			if key == "" {
				errs = append(errs, field.Required(p, key))
			}
			if keys.Has(key) {
				errs = append(errs, field.Duplicate(p, key))
			}
			keys.Insert(key)
			for _, msg := range validation.IsQualifiedName(key) {
				errs = append(errs, field.Invalid(p, key, msg))
			}
		}
	}
	return errs
}

// ValidateCSIDriverName checks a CSI driver's name as Kubernetes does: required, at most
// 63 characters, a DNS subdomain once lowercased.
func ValidateCSIDriverName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	if len(name) > 63 {
		errs = append(errs, field.TooLong(fldPath, "", 63))
	}
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(name)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

// CSIStorageCapacityResource serves storage.k8s.io/v1 csistoragecapacities: namespaced,
// each the capacity a driver reports for a storage class in a node topology (both
// immutable), names may be generated; the NAME STORAGECLASSNAME CAPACITY table.
func CSIStorageCapacityResource() registry.Resource {
	return registry.Strategy[*storagev1.CSIStorageCapacity]{
		Validate: func(c *storagev1.CSIStorageCapacity) field.ErrorList { return validateCSIStorageCapacity(c, false) },
		ValidateUpdate: func(c, old *storagev1.CSIStorageCapacity) field.ErrorList {
			// A selector stored before label values were checked stays acceptable.
			allowInvalid := len(metav1validation.ValidateLabelSelector(old.NodeTopology, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0
			errs := validateCSIStorageCapacity(c, allowInvalid)
			if !apiequality.Semantic.DeepEqual(c.NodeTopology, old.NodeTopology) {
				errs = append(errs, field.Invalid(field.NewPath("nodeTopology"), c.NodeTopology, "field is immutable"))
			}
			if c.StorageClassName != old.StorageClassName {
				errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, "field is immutable"))
			}
			return errs
		},
		Row: func(c *storagev1.CSIStorageCapacity, _ time.Time) []interface{} {
			capacity := "<unset>"
			if c.Capacity != nil {
				capacity = c.Capacity.String()
			}
			return []interface{}{c.Name, c.StorageClassName, capacity}
		},
	}.Apply(registry.Resource{
		GVK:        storagev1.SchemeGroupVersion.WithKind("CSIStorageCapacity"),
		Plural:     "csistoragecapacities",
		Singular:   "csistoragecapacity",
		Namespaced: true,
		New:        func() runtime.Object { return &storagev1.CSIStorageCapacity{} },
		NewList:    func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
		Columns: []metav1.TableColumnDefinition{
			registry.NameColumn,
			{Name: "StorageClassName", Type: "string", Description: storagev1.CSIStorageCapacity{}.SwaggerDoc()["storageClassName"]},
			{Name: "Capacity", Type: "string", Description: storagev1.CSIStorageCapacity{}.SwaggerDoc()["capacity"]},
		},
	})
}

func validateCSIStorageCapacity(c *storagev1.CSIStorageCapacity, allowInvalidLabelValue bool) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	errs := metav1validation.ValidateLabelSelector(c.NodeTopology, opts, field.NewPath("nodeTopology"))
	for _, msg := range apivalidation.NameIsDNSSubdomain(c.StorageClassName, false) {
		errs = append(errs, field.Invalid(field.NewPath("storageClassName"), c.StorageClassName, msg))
	}
	if c.Capacity != nil && c.Capacity.Sign() < 0 {
		errs = append(errs, field.Invalid(field.NewPath("capacity"), c.Capacity.String(), "must be greater than or equal to 0"))
	}
	return errs
}
