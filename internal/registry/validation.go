package registry

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// WithoutMetadata drops the metadata errors of upstream's whole-object validators: the
// generic handlers validate metadata themselves, so each would be reported twice.
func WithoutMetadata(errs field.ErrorList) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		if e.Field == "metadata" || strings.HasPrefix(e.Field, "metadata.") {
			continue
		}
		out = append(out, e)
	}
	return out
}
