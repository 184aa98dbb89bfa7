package builtin

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestSampleAPIServerFlags runs /sample-apiserver --help in-process: the program is
// k8s.io/sample-apiserver's server command, with the flags the Aggregator spec's
// Deployment passes and the delegated authentication it relies on.
func TestSampleAPIServerFlags(t *testing.T) {
	var out bytes.Buffer
	code, handled := Main(context.Background(), []string{"/sample-apiserver", "--help"}, &out, &out)
	if !handled || code != 0 {
		t.Fatalf("Main(/sample-apiserver --help) = %d, %v; want 0, true\n%s", code, handled, out.String())
	}
	for _, flag := range []string{"--etcd-servers", "--tls-cert-file", "--tls-private-key-file", "--audit-log-path",
		"--audit-log-maxage", "--audit-log-maxbackup", "--requestheader-client-ca-file", "--authentication-kubeconfig"} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("help lacks %s:\n%s", flag, out.String())
		}
	}
}
