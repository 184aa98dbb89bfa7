package registry

import (
	"context"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Handler is a subresource a resource serves with code of its own (pods/binding,
// pods/eviction, namespaces/finalize, pods/exec, services/proxy), as Kubernetes' REST
// storage registers a Storage or a Connecter per subresource. The generic handlers
// check the verb, then call Serve, or carry the request to where Connect points.
// A Handler with neither is served by the API server's configuration
// (apiserver.Config.Extra, e.g. serviceaccounts/token); the resource only declares it
// for discovery.
type Handler struct {
	// Name is the subresource's name in URLs ("binding").
	Name string
	// Kind is the kind discovery gives for it; the zero value means the resource's own.
	Kind schema.GroupVersionKind
	// Verbs are the verbs served; nil serves every verb (proxies).
	Verbs []string
	// Hidden keeps the subresource out of discovery (the streaming ones, which the API
	// server has never listed).
	Hidden bool
	// GetIsCreate makes a GET also need the create verb, for upgrades (WebSocket exec,
	// attach, port-forward) that read access must not allow.
	GetIsCreate bool
	// OwnsValidation tells the generic update path that Serve validated its change
	// itself: the resource's update strategy, which would refuse it, does not run.
	OwnsValidation bool
	// Serve handles a request and returns the response object with its HTTP code.
	Serve func(ctx context.Context, req *HandlerRequest) (runtime.Object, int, error)
	// Connect returns where a streaming or proxy request is carried to.
	Connect func(ctx context.Context, req *HandlerRequest) (*Location, error)
}

// HandlerRequest is one subresource request, with what the handler may use of the
// API server.
type HandlerRequest struct {
	// Verb is the request's verb (get, create, update, ...); Subresource the handler's
	// name; Name is the URL's object name, as given ("web:8080" for proxies).
	Verb, Namespace, Name, Subresource string
	// Path is the URL path, Query its parsed query and RawQuery the query as sent.
	Path     string
	Query    url.Values
	RawQuery string
	// Objects reads and writes the resource's objects through the generic handlers.
	Objects Objects
	// Body decodes the request body.
	Body Body
	// DryRun reads the request's ?dryRun (a 400 for a value other than All).
	DryRun func() (bool, error)
}

// Body decodes a request body (JSON, YAML or protobuf, as its Content-Type says).
type Body interface {
	// Decode decodes the body into obj of kind gvk.
	Decode(obj runtime.Object, gvk schema.GroupVersionKind, opts DecodeOptions) error
}

// DecodeOptions say how a handler reads its body.
type DecodeOptions struct {
	// Strict honours the request's ?fieldValidation; otherwise unknown fields are
	// ignored.
	Strict bool
	// Optional leaves obj untouched for an empty body instead of failing.
	Optional bool
}

// Objects is the generic handlers' storage of one resource, as a subresource handler
// sees it. Errors are Kubernetes Status errors ready for the client.
type Objects interface {
	// Get reads an object.
	Get(ctx context.Context, namespace, name string) (runtime.Object, error)
	// GetOf reads an object of another served resource (a pod's node).
	GetOf(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error)
	// ListOf reads every object of another served resource in a namespace (a pod's
	// disruption budgets).
	ListOf(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]runtime.Object, error)
	// UpdateOf runs the generic update path of another served resource, as Update does
	// for this one (an eviction writes its disruption budget's status).
	UpdateOf(ctx context.Context, gvr schema.GroupVersionResource, namespace, name, subresource string, dryRun bool, mutate func(current runtime.Object) (runtime.Object, error)) (runtime.Object, int, error)
	// Update runs the generic update path (admission, metadata, compare-and-swap
	// retries) for the subresource, with mutate computing the new object from a copy
	// of the current one; it may run several times.
	Update(ctx context.Context, namespace, name, subresource string, dryRun bool, mutate func(current runtime.Object) (runtime.Object, error)) (runtime.Object, int, error)
	// Delete runs the generic delete path (preconditions, finalizers, grace).
	Delete(ctx context.Context, namespace, name string, opts *metav1.DeleteOptions, dryRun bool) (runtime.Object, int, error)
	// Now is the API server's clock.
	Now() time.Time
}

// Backend names the transport a Location is reached with.
type Backend int

const (
	// BackendNode is a node agent's endpoint (the API server's client certificate).
	BackendNode Backend = iota
	// BackendPod is a pod's own address (no client credentials).
	BackendPod
)

// Location is where a streaming or proxy request goes.
type Location struct {
	URL     *url.URL
	Backend Backend
	// DialError prefixes the 503 message when the target cannot be reached
	// ("error dialing backend").
	DialError string
}

// DeleteStrategy is the part of deletion a resource decides (Kubernetes'
// RESTGracefulDeleteStrategy and the namespace's finalize phase); each hook is
// optional.
type DeleteStrategy struct {
	// GracePeriod returns how many seconds the deletion of obj waits (a pod on a
	// node); 0 deletes at once unless finalizers hold it.
	GracePeriod func(obj runtime.Object, opts *metav1.DeleteOptions) int64
	// Finalizing reports whether obj waits for something besides metadata.finalizers
	// (a namespace's spec.finalizers).
	Finalizing func(obj runtime.Object) bool
	// AwaitsGrace reports whether an object marked for deletion with a grace period
	// still waits for it to end (a pod whose node has not stopped it).
	AwaitsGrace func(obj runtime.Object) bool
	// MarkDeleting updates an object being marked for deletion (a namespace turns
	// Terminating) and reports whether it changed anything.
	MarkDeleting func(obj runtime.Object) bool
}

// FindHandler returns the handler of the named subresource, or nil.
func (r *Resource) FindHandler(name string) *Handler {
	for i := range r.Handlers {
		if r.Handlers[i].Name == name {
			return &r.Handlers[i]
		}
	}
	return nil
}
