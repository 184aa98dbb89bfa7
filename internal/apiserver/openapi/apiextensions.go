package openapi

import (
	"strings"

	apiextopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
)

// withAPIExtensions adds to defs the definitions openapi-gen generated for
// apiextensions.k8s.io (CustomResourceDefinition and the JSON schema types it embeds,
// whose JSON forms reflection cannot describe), from k8s.io/apiextensions-apiserver's
// own generated package; the definitions package generated already has stay.
func withAPIExtensions(defs map[string]common.OpenAPIDefinition, ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	for name, def := range apiextopenapi.GetOpenAPIDefinitions(ref) {
		if _, ok := defs[name]; !ok && strings.HasPrefix(name, "io.k8s.apiextensions-apiserver.") {
			defs[name] = def
		}
	}
	return defs
}
