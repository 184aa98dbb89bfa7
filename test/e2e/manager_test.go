package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControllerManager: the controllers run in one manager whose work queues are
// served on the API server's /metrics under the controllers' names, and a cluster start
// does not log the EndpointSlice controller's expected stale-cache requeues (upstream
// logs them verbosely only).
func TestControllerManager(t *testing.T) {
	c := up(t)
	metrics := c.srv.must(t, "get", "--raw", "/metrics")
	for _, name := range []string{"endpointslice", "endpoint", "deployment", "namespace", "serviceaccount", "root_ca_cert_publisher", "localpv", "nodeipam"} {
		for _, series := range []string{`workqueue_adds_total{name="` + name + `"}`, `workqueue_depth{name="` + name + `"}`} {
			if !strings.Contains(metrics, series) {
				t.Errorf("/metrics has no %s", series)
			}
		}
	}
	if !strings.Contains(metrics, `endpoint_slice_controller_syncs{result="success"}`) {
		t.Errorf("/metrics has no endpoint_slice_controller_syncs{result=\"success\"}")
	}
	log, err := os.ReadFile(filepath.Join(c.dataDir, "tranche.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "informer cache is out of date") {
			t.Errorf("tranche.log reports an expected stale-cache requeue: %s", line)
		}
	}
}
