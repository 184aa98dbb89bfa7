package cluster

import (
	"strings"
	"testing"
)

func TestAgentArgsImageGC(t *testing.T) {
	high, low := 90, 0
	a := Agent{Node: "n1", Kubeconfig: "k", ClusterFile: "c", RootDir: "r"}
	base := strings.Join(a.Args(), " ")
	if strings.Contains(base, "image-gc") {
		t.Errorf("no thresholds given, yet %q", base)
	}
	a.ImageGC = ImageGC{HighThresholdPercent: &high, LowThresholdPercent: &low}
	if got := strings.Join(a.Args(), " "); got != base+" --image-gc-high-threshold 90 --image-gc-low-threshold 0" {
		t.Errorf("Args = %q", got)
	}
}
