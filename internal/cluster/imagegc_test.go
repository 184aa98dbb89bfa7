package cluster

import (
	"path/filepath"
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

// TestStateKeepsImageGC: the image GC settings of `tranche up` are saved in cluster.json,
// where startAgent reads them for agents started later (`tranche node add`, restarts),
// which therefore run with the same thresholds.
func TestStateKeepsImageGC(t *testing.T) {
	high, low, age := 90, 10, 5*time.Second
	path := filepath.Join(t.TempDir(), "cluster.json")
	in, err := newState("tr", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	in.ImageGC = ImageGC{HighThresholdPercent: &high, LowThresholdPercent: &low, MinAge: &age}
	if err := saveState(path, in); err != nil {
		t.Fatal(err)
	}
	out, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	a := Agent{Node: "n1", Kubeconfig: "k", ClusterFile: "c", RootDir: "r", ImageGC: out.ImageGC}
	if got := strings.Join(a.Args(), " "); !strings.HasSuffix(got, " --image-gc-high-threshold 90 --image-gc-low-threshold 10 --minimum-image-ttl-duration 5s") {
		t.Errorf("an agent started from the saved state runs with %q", got)
	}
}
