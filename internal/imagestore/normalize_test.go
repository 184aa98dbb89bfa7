package imagestore

import (
	"errors"
	"testing"
)

func TestNormalize(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		ref     string
		want    string
		wantErr string
	}{
		{ref: "busybox", want: "docker.io/library/busybox:latest"},
		{ref: "nginx:1.27", want: "docker.io/library/nginx:1.27"},
		{ref: "library/nginx", want: "docker.io/library/nginx:latest"},
		{ref: "docker.io/busybox", want: "docker.io/library/busybox:latest"},
		{ref: "index.docker.io/library/busybox:1.36", want: "docker.io/library/busybox:1.36"},
		{ref: "bitnami/redis:7", want: "docker.io/bitnami/redis:7"},
		{ref: "registry.k8s.io/pause:3.10", want: "registry.k8s.io/pause:3.10"},
		{ref: "localhost:5000/app", want: "localhost:5000/app:latest"},
		{ref: "quay.io/org/sub/app:v1.2.3", want: "quay.io/org/sub/app:v1.2.3"},
		{ref: "busybox@" + digest, want: "docker.io/library/busybox@" + digest},
		{ref: "registry.k8s.io/pause@" + digest, want: "registry.k8s.io/pause@" + digest},
		{ref: "nginx:1.27@" + digest, want: "docker.io/library/nginx@" + digest},
		{
			ref:     "",
			wantErr: `Failed to apply default image tag "": couldn't parse image name "": invalid reference format`,
		},
		{
			ref:     "nginx:",
			wantErr: `Failed to apply default image tag "nginx:": couldn't parse image name "nginx:": invalid reference format`,
		},
		{
			ref:     "ghcr.io/${{ github.repository }}:latest",
			wantErr: `Failed to apply default image tag "ghcr.io/${{ github.repository }}:latest": couldn't parse image name "ghcr.io/${{ github.repository }}:latest": invalid reference format`,
		},
		{
			ref:     "busybox@sha256:short",
			wantErr: `Failed to apply default image tag "busybox@sha256:short": couldn't parse image name "busybox@sha256:short": invalid reference format`,
		},
		{
			ref:     " busybox",
			wantErr: `Failed to apply default image tag " busybox": couldn't parse image name " busybox": invalid reference format`,
		},
		{
			ref:     "BUSYBOX",
			wantErr: `Failed to apply default image tag "BUSYBOX": couldn't parse image name "BUSYBOX": invalid reference format: repository name (library/BUSYBOX) must be lowercase`,
		},
		{
			ref:     "unsloth/gemma-3-4b-it-GGUF:Q4_K_XL",
			wantErr: `Failed to apply default image tag "unsloth/gemma-3-4b-it-GGUF:Q4_K_XL": couldn't parse image name "unsloth/gemma-3-4b-it-GGUF:Q4_K_XL": invalid reference format: repository name (unsloth/gemma-3-4b-it-GGUF) must be lowercase`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.ref, func(t *testing.T) {
			got, err := Normalize(tc.ref)
			if tc.wantErr != "" {
				if err == nil {
					t.Fatalf("Normalize(%q) = %q, want error %q", tc.ref, got, tc.wantErr)
				}
				if err.Error() != tc.wantErr {
					t.Errorf("error\n got %s\nwant %s", err, tc.wantErr)
				}
				if !errors.Is(err, ErrInvalidName) {
					t.Errorf("error %v does not wrap ErrInvalidName", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Normalize(%q): %v", tc.ref, err)
			}
			if got != tc.want {
				t.Errorf("Normalize(%q) = %q, want %q", tc.ref, got, tc.want)
			}
			if again, err := Normalize(got); err != nil || again != got {
				t.Errorf("Normalize is not idempotent: Normalize(%q) = %q, %v", got, again, err)
			}
		})
	}
}
