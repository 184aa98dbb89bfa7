package registry

import (
	"time"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource is one served resource and the strategy the generic handlers apply to it.
// Every hook is optional; a nil hook does nothing. Hooks receive the typed object
// (the one New returns) and must not do I/O.
//
// Order on create: PrepareForCreate, Default, metadata validation, Validate.
// Order on update: PrepareForUpdate, Default, metadata validation, ValidateUpdate.
// The handlers own metadata (uid, creationTimestamp, resourceVersion, generation when
// TrackGeneration is set) and, when Status is not nil, keep status out of spec writes and
// spec out of status writes.
type Resource struct {
	// GVK is the served group, version and kind, e.g. {"", "v1", "Service"}.
	GVK schema.GroupVersionKind
	// Plural is the resource name in URLs ("services"); Singular is its singular form.
	Plural, Singular string
	// ShortNames ("svc") and Categories ("all") are published in discovery.
	ShortNames []string
	Categories []string
	// Namespaced is false for cluster-scoped resources (nodes, namespaces, ...).
	Namespaced bool
	// Verbs restricts the verbs served; nil means all of get, list, watch, create,
	// update, patch, delete, deletecollection.
	Verbs []string
	// New returns an empty object (&v1.Service{}); NewList an empty list (&v1.ServiceList{}).
	New     func() runtime.Object
	NewList func() runtime.Object

	// NameValidation checks metadata.name (and generateName with prefix=true);
	// nil means apivalidation.NameIsDNSSubdomain.
	NameValidation apivalidation.ValidateNameFunc
	// TrackGeneration makes the handlers set metadata.generation to 1 on create and bump
	// it when anything but metadata and status changes.
	TrackGeneration bool

	// PrepareForCreate clears what a client may not set on create (usually status).
	PrepareForCreate func(obj runtime.Object)
	// PrepareForUpdate adjusts obj from old before validation (e.g. keep immutable parts).
	PrepareForUpdate func(obj, old runtime.Object)
	// Default fills defaults the way Kubernetes' defaulters do, on create and update.
	Default func(obj runtime.Object)
	// Validate checks a new object; field paths start below the object ("spec.ports[0].port").
	Validate func(obj runtime.Object) field.ErrorList
	// ValidateUpdate checks obj against old (immutable fields and the same rules as Validate).
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// Warnings returns deprecation warnings for a create (old == nil) or update.
	Warnings func(obj, old runtime.Object) []string

	// Status is set when the resource has a status subresource.
	Status *StatusStrategy
	// Scale is set when the resource has a scale subresource (autoscaling/v1 Scale).
	Scale *ScaleStrategy
	// Subresources are subresources that show the whole object and write one part of
	// it (pods/ephemeralcontainers), keyed by name; each serves get, update and patch.
	Subresources map[string]*SubresourceStrategy
	// Handlers are subresources served by code of the resource's own (binding,
	// eviction, finalize, streaming and proxies), listed in discovery in this order
	// after status, scale and Subresources.
	Handlers []Handler
	// Delete is set when deletion depends on the object (graceful deletion, spec
	// finalizers); nil deletes when metadata.finalizers allow.
	Delete *DeleteStrategy

	// Columns and Row give the table kubectl prints: Row returns one cell per column, in
	// order, including the -o wide columns (Priority 1). Nil Columns means the default
	// NAME, AGE table. Cells are string, int64, bool or float64; ages are strings made
	// with HumanAge(creationTimestamp, now).
	Columns []metav1.TableColumnDefinition
	Row     func(obj runtime.Object, now time.Time) []interface{}

	// Fields returns the fields this resource supports in field selectors, besides
	// metadata.name and metadata.namespace which the handlers add.
	Fields func(obj runtime.Object) fields.Set

	// DeprecationWarning, when set, is sent as a warning with every request to the
	// resource, as Kubernetes does for deprecated APIs.
	DeprecationWarning string

	// Computed marks a resource that is never stored (metrics.k8s.io's NodeMetrics and
	// PodMetrics): the API server hands every request for it to the handler its
	// configuration gives for it (apiserver.Config.Computed).
	Computed bool

	// Storage is set when the resource is another version's view of a stored resource
	// (events.k8s.io/v1 Event over core/v1 Event): objects are kept as Storage.GVR and
	// converted with ToStorage / FromStorage.
	Storage *StorageView
}

// StatusStrategy is the status subresource's part of the strategy.
type StatusStrategy struct {
	// PrepareForUpdate adjusts obj (whose spec and metadata the handlers already reset
	// from old) before validation.
	PrepareForUpdate func(obj, old runtime.Object)
	// ValidateUpdate checks a status write.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
}

// SubresourceStrategy is the strategy of a subresource whose GET returns the object
// itself and whose PUT and PATCH take the object and change only the part the
// subresource owns. The handlers keep metadata and status as on any spec write;
// PrepareForUpdate keeps everything else but that part, the resource's Default runs,
// then metadata validation and ValidateUpdate. Writes to the object itself that change
// the part are the resource's ValidateUpdate to refuse.
type SubresourceStrategy struct {
	// PrepareForUpdate resets obj from old except the part the subresource writes.
	PrepareForUpdate func(obj, old runtime.Object)
	// ValidateUpdate checks a write through the subresource.
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
}

// ScaleStrategy reads and writes the replicas of a scalable resource.
type ScaleStrategy struct {
	// Get returns spec.replicas, status.replicas and the label selector as a string.
	Get func(obj runtime.Object) (specReplicas, statusReplicas int32, selector string)
	// Set writes spec.replicas.
	Set func(obj runtime.Object, replicas int32)
}

// StorageView maps a served resource onto the stored one.
type StorageView struct {
	GVR       schema.GroupVersionResource
	ToStorage func(obj runtime.Object) runtime.Object
	// FromStorage converts a stored object into the served type.
	FromStorage func(obj runtime.Object) runtime.Object
}

// GVR returns the resource's group, version and plural name.
func (r *Resource) GVR() schema.GroupVersionResource {
	return r.GVK.GroupVersion().WithResource(r.Plural)
}

// AllVerbs is the verb set of an ordinary resource.
var AllVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// ServedVerbs returns Verbs, or AllVerbs when Verbs is nil.
func (r *Resource) ServedVerbs() []string {
	if r.Verbs == nil {
		return AllVerbs
	}
	return r.Verbs
}

// HasVerb reports whether verb is served.
func (r *Resource) HasVerb(verb string) bool {
	for _, v := range r.ServedVerbs() {
		if v == verb {
			return true
		}
	}
	return false
}
