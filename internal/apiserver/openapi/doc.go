// Package openapi builds the OpenAPI v2 (swagger) and v3 documents the API server publishes
// at /openapi/v2 and /openapi/v3. The schemas are the definitions openapi-gen generated from
// k8s.io/api and the other API packages (package generated, `make generate`), as
// kube-apiserver publishes them; server-side apply types objects with the same definitions
// (see SchemaDefinitions). A Go type with no generated definition (a type of tranche's own)
// is described by reflection over its fields and struct tags instead.
//
// kubectl depends on these documents: `kubectl explain` walks the v3 schemas, `kubectl apply`
// decides from the fieldValidation parameter of the v3 PATCH operations that the server
// validates fields (and otherwise validates client-side against v2), and its client-side
// strategic merge patch reads x-kubernetes-patch-strategy and x-kubernetes-patch-merge-key.
// Names, paths, operation ids and extensions therefore follow Kubernetes exactly.
//
// Everything is computed once by Build; the Documents it returns are immutable and safe for
// concurrent use.
package openapi
