// Package registry describes the resources the API server serves. Each API group has a
// package below this one (core, apps, batch, ...) that returns its Resources: identity,
// defaulting, validation, table columns, selectable fields and the subresources and
// deletion rules that are the resource's own. The generic handlers in
// internal/apiserver do everything else (storage, metadata, resourceVersion, patch,
// watch, discovery) and name no resource.
//
// # How a resource plugs in
//
// A resource is one Resource value, listed in registry/all:
//
//   - Identity: GVK, Plural, Singular, ShortNames, Categories, Namespaced, Verbs, and
//     New/NewList returning its Go types. A resource without Go types is
//     Unstructured(gvk, plural, singular, namespaced): the generic handlers serve it
//     with metadata rules only, as they will for CustomResourceDefinitions.
//   - Strategy (Kubernetes' RESTCreateStrategy and RESTUpdateStrategy):
//     PrepareForCreate, PrepareForUpdate, Default, Validate, ValidateUpdate, Warnings.
//     Write them for the Go type and adapt them once: registry.Hook, HookUpdate, Func,
//     FuncUpdate, FuncWith and Scale, or a whole Strategy[T] with Apply. The adapters
//     hold the only type assertion; hooks never see another type or a nil object
//     (except a create's Warnings, whose old object is the nil T).
//   - Status, Scale and Subresources: the status subresource's strategy, the
//     autoscaling/v1 Scale accessors, and subresources that write one part of the
//     object (pods/ephemeralcontainers). The generic handlers serve get, update and
//     patch for them.
//   - Handlers: subresources with code of their own, each with its name, verbs and
//     discovery kind. Serve answers a request using HandlerRequest.Objects (the
//     generic get, update and delete paths, with admission and retries) and
//     HandlerRequest.Body (pods/binding, pods/eviction, namespaces/finalize); Connect
//     returns the Location a streaming or proxy request is carried to (pods/exec,
//     pods/log, services/proxy). A Handler with neither only declares a subresource
//     the API server's configuration serves (serviceaccounts/token).
//   - Delete: the resource's part of deletion (Kubernetes' graceful delete strategy):
//     a grace period (pods on a node), waiting on more than metadata.finalizers
//     (a namespace's spec.finalizers), and what changes when an object is marked
//     for deletion (a namespace turns Terminating).
//   - Columns and Row for kubectl's table, Fields for field selectors.
//
// Hooks do no I/O except through HandlerRequest.Objects; they run inside the
// generic handlers' retries and may run more than once.
package registry
