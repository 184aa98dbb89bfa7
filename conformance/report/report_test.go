package main

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/README.golden.md")

func TestLoad(t *testing.T) {
	run, err := Load("testdata/reports", []string{"sig-network", "sig-apps", "sig-cli"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Area{{
		Name:   "sig-network",
		Passed: 1,
		Failed: []Failure{
			{
				Spec: "[sig-network] Services should serve a basic endpoint from pods [Conformance]",
				Line: `[FAILED] failed to get pod: pods "pod1" not found`,
			},
			{
				Spec: "[sig-network] Proxy version v1 should proxy through a service and a pod [Conformance]",
				Line: "[TIMEDOUT] A suite timeout occurred",
			},
			{
				Spec: "[sig-network] Services should have session affinity work for NodePort service [Serial] [Conformance]",
				Line: "[PANICKED] Test Panicked | runtime error: index out of range",
			},
		},
		Skipped:  1,
		Duration: 754 * time.Second,
		Images:   []string{"registry.k8s.io/e2e-test-images/nonewprivs:1.3"},
	}, {
		Name:    "sig-apps",
		Missing: true,
	}, {
		Name:     "sig-cli",
		Skipped:  1,
		Duration: 5 * time.Second,
		SuiteFailures: []Failure{{
			Spec: "[SynchronizedBeforeSuite]",
			Line: "[FAILED] Error waiting for all pods to be running and ready: 1 / 2 pods in namespace kube-system are not Running",
		}},
		// From the specs' output (parallel.log), where the events are.
		Images: []string{"registry.k8s.io/e2e-test-images/kitten:1.7", "registry.k8s.io/e2e-test-images/nautilus:1.7"},
	}}
	// The seconds file wins over the suites' times (120.5 + 30 s) when the script wrote it.
	if diff := cmp.Diff(want, run.Areas); diff != "" {
		t.Errorf("areas (-want +got):\n%s", diff)
	}
	if got := run.Areas[0].Specs(); got != 5 {
		t.Errorf("sig-network specs = %d, want 5 (filtered-out specs and suite nodes do not count)", got)
	}
}

func TestLoadBadReport(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sig-node"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sig-node", "junit_01.xml"), []byte("<testsuites><testsuite"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, []string{"sig-node"}); err == nil {
		t.Error("Load of a truncated report: no error")
	}
}

func TestMarkdown(t *testing.T) {
	run, err := Load("testdata/reports", []string{"sig-network", "sig-apps", "sig-cli"})
	if err != nil {
		t.Fatal(err)
	}
	run.Total = 21*time.Minute + 3*time.Second
	run.Procs = 4
	run.Note = "areas run on 2026-12-04: sig-network sig-apps sig-cli"
	got := Markdown(run)
	golden := filepath.Join("testdata", "README.golden.md")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("markdown (-want +got):\n%s", diff)
	}
}

func TestMinutes(t *testing.T) {
	for d, want := range map[time.Duration]string{
		40 * time.Second:                "40s",
		12*time.Minute + 5*time.Second:  "12m05s",
		62*time.Minute + 30*time.Second: "1h02m",
		1500 * time.Millisecond:         "2s",
	} {
		if got := minutes(d); got != want {
			t.Errorf("minutes(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestFirstLine(t *testing.T) {
	for in, want := range map[string]string{
		"[FAILED] \n\n Failed to UpdateStatus. Service \"s\" is invalid\n\n: more\nIn [It] at: x.go:1": `[FAILED] Failed to UpdateStatus. Service "s" is invalid`,
		"\n[FAILED] pods \"p\" not found\nIn [It] at: x.go:1":                                          `[FAILED] pods "p" not found`,
		"[FAILED] Expected\n    <int>: 3\nto equal\n    <int>: 4\nIn [It] at: x.go:1":                  "[FAILED] Expected <int>: 3 to equal <int>: 4",
		"[TIMEDOUT]\n": "[TIMEDOUT]",
		"interrupted":  "interrupted",
		"":             "",
	} {
		if got := firstLine(in); got != want {
			t.Errorf("firstLine(%q) = %q, want %q", in, got, want)
		}
	}
}
