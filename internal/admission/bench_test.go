package admission

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BenchmarkAdmission prints what the step adds to every write: a create of a pod
// through Mutate and Validate with no configuration at all, and with one validating
// webhook (an in-process TLS server) that allows it. Compare the two ns/op.
func BenchmarkAdmission(b *testing.B) {
	srv := newReviewServer(b, map[string]func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse{
		"/allow": func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return &admissionv1.AdmissionResponse{Allowed: true}
		},
	})
	for _, bc := range []struct {
		name    string
		objects []runtime.Object
	}{
		{"no-configuration", nil},
		{"one-webhook", []runtime.Object{validatingHook("allow.example.com", clientConfig(srv.URL+"/allow", srv.caBundle()), nil)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := startWebhooks(b, bc.objects...)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				req := podRequest(nil)
				if err := w.Mutate(ctx, req); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Validate(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
