package cluster

import (
	"strings"
	"testing"
	"time"
)

func TestAgentArgsImageGC(t *testing.T) {
	high, low, age, period := 90, 0, 5*time.Second, time.Minute
	a := Agent{Node: "n1", Kubeconfig: "k", ClusterFile: "c", RootDir: "r"}
	base := strings.Join(a.Args(), " ")
	if strings.Contains(base, "image-gc") {
		t.Errorf("no thresholds given, yet %q", base)
	}
	a.ImageGC = ImageGC{HighThresholdPercent: &high, LowThresholdPercent: &low, MinAge: &age, Period: &period}
	if got := strings.Join(a.Args(), " "); got != base+" --image-gc-high-threshold 90 --image-gc-low-threshold 0 --minimum-image-ttl-duration 5s --image-gc-period 1m0s" {
		t.Errorf("Args = %q", got)
	}
}
