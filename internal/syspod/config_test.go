package syspod

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfig: each source is used when it should be, and a missing one says which flag
// to give.
func TestConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://10.240.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	sa := filepath.Join(dir, "sa")
	if err := os.MkdirAll(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")

	t.Run("kubeconfig", func(t *testing.T) {
		c, err := Config(kubeconfig, "", sa)
		if err != nil || c.Host != "https://10.240.0.1:6443" || c.BearerToken != "t" {
			t.Fatalf("Config = %+v, %v", c, err)
		}
	})
	t.Run("kubeconfig with another server", func(t *testing.T) {
		c, err := Config(kubeconfig, "https://10.96.0.1:443", sa)
		if err != nil || c.Host != "https://10.96.0.1:443" {
			t.Fatalf("Config = %+v, %v", c, err)
		}
	})
	t.Run("not in a cluster", func(t *testing.T) {
		if _, err := Config("", "", sa); err == nil || !strings.Contains(err.Error(), "give --kubeconfig or --api-server") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("api server without a token", func(t *testing.T) {
		if _, err := Config("", "https://10.96.0.1:443", sa); err == nil || !strings.Contains(err.Error(), "service account token") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("api server with the service account", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(sa, "token"), []byte("tok"), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Config("", "https://10.96.0.1:443", sa)
		if err != nil || c.Host != "https://10.96.0.1:443" || c.BearerTokenFile != filepath.Join(sa, "token") || c.CAFile != filepath.Join(sa, "ca.crt") {
			t.Fatalf("Config = %+v, %v", c, err)
		}
	})
}
