package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLogFields(t *testing.T) {
	got := logFields(`time=2026-12-04T13:00:00.000Z level=DEBUG msg="container started" node=n1 pod=ns/p-001 container=pause env=12.5µs run=41.2ms note="a \"b\" c"`)
	want := map[string]string{"time": "2026-12-04T13:00:00.000Z", "level": "DEBUG", "msg": "container started", "node": "n1",
		"pod": "ns/p-001", "container": "pause", "env": "12.5µs", "run": "41.2ms", "note": `a "b" c`}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d fields %v, want %d", len(got), got, len(want))
	}
}

func TestReadAgentPhases(t *testing.T) {
	dir := t.TempDir()
	log := strings.Join([]string{
		`time=x level=DEBUG msg="container started" pod=a/p-1 container=c env=1ms image=2ms plan=1ms layers=1ms bundle=3ms run=40ms total=48ms`,
		`time=x level=DEBUG msg="container started" pod=a/p-2 container=c env=1ms image=2ms plan=1ms layers=1ms bundle=5ms run=60ms total=70ms`,
		`time=x level=DEBUG msg="container started" pod=b/p-1 container=c env=9ms image=2ms plan=1ms layers=1ms bundle=5ms run=60ms total=78ms`,
		`time=x level=DEBUG msg="pod status written" pod=a/p-1 phase=Pending ready=false queued=1ms volumes=1ms runtime=1ms write=1ms`,
		`time=x level=DEBUG msg="pod status written" pod=a/p-1 phase=Running ready=true queued=2ms volumes=1ms runtime=50ms write=4ms`,
		`time=x level=DEBUG msg="pod status written" pod=a/p-1 phase=Running ready=true queued=9ms volumes=1ms runtime=1ms write=4ms`,
		`time=x level=INFO msg="pod scheduled" pod=a/p-1`,
	}, "\n") + "\n"
	if err := os.MkdirAll(filepath.Join(dir, "nodes", "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nodes", "n1", "agent.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := readAgentPhases(dir, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got := p["container started"]["run"]; len(got) != 2 || got[0] != 40*time.Millisecond || got[1] != 60*time.Millisecond {
		t.Errorf("container run = %v, want [40ms 60ms] (namespace b's line left out)", got)
	}
	if got := p["pod status written"]["runtime"]; len(got) != 1 || got[0] != 50*time.Millisecond {
		t.Errorf("status runtime = %v, want [50ms] (only the first write that made the pod Ready)", got)
	}
	notes := strings.Join(p.notes(), "\n")
	for _, want := range []string{"container (p50 of 2): env 1.0 ms", "run 40.0 ms", "no \"pod sandbox created\" debug lines"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
}
