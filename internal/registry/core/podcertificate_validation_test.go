package core

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

func TestValidatePodCertificateProjection(t *testing.T) {
	ok := func(mut func(*v1.PodCertificateProjection)) *v1.ProjectedVolumeSource {
		p := &v1.PodCertificateProjection{SignerName: "example.com/s", KeyType: "ED25519", CredentialBundlePath: "creds.pem"}
		if mut != nil {
			mut(p)
		}
		return &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{PodCertificate: p}}}
	}
	cases := []struct {
		name string
		src  *v1.ProjectedVolumeSource
		want []string
	}{
		{name: "valid", src: ok(nil)},
		{name: "an hour", src: ok(func(p *v1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](3600) })},
		{name: "too short", src: ok(func(p *v1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](3599) }),
			want: []string{"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 3599: if provided, maxExpirationSeconds must be >= 3600"}},
		{name: "over 91 days", src: ok(func(p *v1.PodCertificateProjection) { p.MaxExpirationSeconds = ptr.To[int32](91*86400 + 1) }),
			want: []string{"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 7862401: if provided, maxExpirationSeconds must be <= 7862400"}},
		{name: "kubernetes.io signer over a day", src: ok(func(p *v1.PodCertificateProjection) {
			p.SignerName = "kubernetes.io/x"
			p.MaxExpirationSeconds = ptr.To[int32](86401)
		}), want: []string{"spec.volumes[0].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 86401: if provided, maxExpirationSeconds must be <= 86400"}},
		{name: "key type", src: ok(func(p *v1.PodCertificateProjection) { p.KeyType = "DSA" }),
			want: []string{`spec.volumes[0].projected.sources[0].podCertificate.keyType: Unsupported value: "DSA": supported values: "RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"`}},
		{name: "no path", src: ok(func(p *v1.PodCertificateProjection) { p.CredentialBundlePath = "" }),
			want: []string{"spec.volumes[0].projected.sources[0].podCertificate: Required value: specify at least one of credentialBundlePath, keyPath, and certificateChainPath"}},
		{name: "same path twice", src: ok(func(p *v1.PodCertificateProjection) { p.KeyPath = "creds.pem" }),
			want: []string{`spec.volumes[0].projected: Invalid value: "creds.pem": conflicting duplicate paths`}},
		{name: "bad signer", src: ok(func(p *v1.PodCertificateProjection) { p.SignerName = "nodomain" }),
			want: []string{`spec.volumes[0].projected.sources[0].podCertificate.signerName: Invalid value: "nodomain": must be a fully qualified domain and path of the form 'example.com/signer-name'`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range podValidateProjected(tc.src, field.NewPath("spec", "volumes").Index(0).Child("projected")) {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestValidateClusterTrustBundleProjection(t *testing.T) {
	src := func(mut func(*v1.ClusterTrustBundleProjection)) *v1.ProjectedVolumeSource {
		p := &v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), LabelSelector: &metav1.LabelSelector{}, Path: "ca.pem"}
		if mut != nil {
			mut(p)
		}
		return &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ClusterTrustBundle: p}}}
	}
	const at = "spec.volumes[0].projected.sources[0].clusterTrustBundle"
	cases := []struct {
		name string
		src  *v1.ProjectedVolumeSource
		want []string
	}{
		{name: "by signer", src: src(nil)},
		{name: "by name", src: src(func(p *v1.ClusterTrustBundleProjection) {
			p.SignerName, p.LabelSelector, p.Name = nil, nil, ptr.To("example.com:s:x")
		})},
		{name: "both", src: src(func(p *v1.ClusterTrustBundleProjection) { p.Name = ptr.To("x") }),
			want: []string{at + ": Invalid value:"}},
		{name: "neither", src: src(func(p *v1.ClusterTrustBundleProjection) { p.SignerName = nil }),
			want: []string{at + ": Required value: either name or signerName must be specified"}},
		{name: "name with selector", src: src(func(p *v1.ClusterTrustBundleProjection) { p.SignerName, p.Name = nil, ptr.To("x") }),
			want: []string{at + ".labelSelector: Invalid value:"}},
		{name: "no path", src: src(func(p *v1.ClusterTrustBundleProjection) { p.Path = "" }),
			want: []string{at + ".path: Required value"}},
		{name: "path up", src: src(func(p *v1.ClusterTrustBundleProjection) { p.Path = "../ca.pem" }),
			want: []string{at + `.path: Invalid value: "../ca.pem": must not contain '..'`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range podValidateProjected(tc.src, field.NewPath("spec", "volumes").Index(0).Child("projected")) {
				got = append(got, e.Error())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d: %q, want prefix %q", i, got[i], tc.want[i])
				}
			}
		})
	}
}
