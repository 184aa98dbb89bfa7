package apiserver

import (
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	v1 "k8s.io/api/core/v1"
)

// BenchmarkPatchCopyAttack applies issue 16's JSON patch, 17 copies of a ConfigMap's
// data into itself, without the bounds (json-patch unlimited, as before) and with them
// (applyPatch). Compare ns/op and B/op of the two: the unbounded run builds a 64 MiB
// object from an 807-byte patch; the bounded one stops at the 3 MiB copy limit:
//
//	go test -run XXX -bench PatchCopyAttack -benchtime 3x ./internal/apiserver/
func BenchmarkPatchCopyAttack(b *testing.B) {
	var e *entry
	for _, res := range testResources() {
		if res.Plural == "configmaps" {
			e = &entry{res: &res, store: &resourceStore{gr: res.GVR().GroupResource()}}
		}
	}
	current := makeConfigMap("x", func(cm *v1.ConfigMap) { cm.Data["k"] = strings.Repeat("v", 512) })
	patch := doublingCopies(17)
	b.Run("unbounded", func(b *testing.B) {
		saved := jsonpatch.AccumulatedCopySizeLimit
		jsonpatch.AccumulatedCopySizeLimit = 0
		b.Cleanup(func() { jsonpatch.AccumulatedCopySizeLimit = saved })
		b.ReportAllocs()
		for b.Loop() {
			p, err := jsonpatch.DecodePatch(patch)
			if err != nil {
				b.Fatal(err)
			}
			patched, err := p.Apply([]byte(`{"metadata":{"name":"x"},"data":{"k":"` + current.Data["k"] + `"}}`))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(patched)), "result-bytes")
			// As before, the result was then decoded (and refused: data holds strings).
			if _, err := decodeInto(patched, e.res.New(), e.res.GVK, validationStrict); err == nil {
				b.Fatal("nested data decoded into a ConfigMap")
			}
		}
	})
	b.Run("bounded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := applyPatch(e, current.DeepCopy(), "application/json-patch+json", patch, validationStrict); err == nil {
				b.Fatal("the attack applied")
			}
		}
	})
}
