package cluster

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStartTime(t *testing.T) {
	fields := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 4242 20 21"
	for _, tc := range []struct {
		name, stat string
		want       uint64
		ok         bool
	}{
		{name: "plain", stat: "17 (sleep)" + fields, want: 4242, ok: true},
		{name: "name with spaces and parens", stat: "17 (a) b (c)" + fields, want: 4242, ok: true},
		{name: "truncated", stat: "17 (sleep) S 1 2", ok: false},
		{name: "no name", stat: "garbage", ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStartTime(tc.stat)
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseStartTime = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParsePIDFile(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		pid        int
		start      uint64
		wantErr    bool
	}{
		{name: "pid and start", text: "123 456\n", pid: 123, start: 456},
		{name: "bare pid", text: "123", pid: 123},
		{name: "empty", text: "", wantErr: true},
		{name: "init is never ours", text: "1 5", wantErr: true},
		{name: "not a number", text: "abc 5", wantErr: true},
		{name: "too many fields", text: "1 2 3", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid, start, err := parsePIDFile(tc.text)
			if (err != nil) != tc.wantErr || pid != tc.pid || start != tc.start {
				t.Errorf("parsePIDFile(%q) = %d, %d, %v; want %d, %d, error %v", tc.text, pid, start, err, tc.pid, tc.start, tc.wantErr)
			}
		})
	}
}

func TestMountsUnder(t *testing.T) {
	table := strings.Join([]string{
		"22 1 0:21 / / rw - ext4 /dev/sda1 rw",
		"30 22 0:40 / /data rw - ext4 /dev/sdb1 rw",
		"31 30 0:41 / /data/nodes/a/vol rw - tmpfs tmpfs rw",
		"32 31 0:42 / /data/nodes/a/vol/sub rw - tmpfs tmpfs rw",
		"33 22 0:43 / /data2/x rw - tmpfs tmpfs rw",
		`34 30 0:44 / /data/my\040vol rw - tmpfs tmpfs rw`,
		"35 30 0:45 / /data/nodes/a/vol rw - tmpfs tmpfs rw",
	}, "\n")
	got, err := mountsUnder(strings.NewReader(table), "/data/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/data/nodes/a/vol/sub", "/data/nodes/a/vol", "/data/my vol"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mountsUnder (-want +got):\n%s", diff)
	}
}

func TestNewState(t *testing.T) {
	for _, tc := range []struct {
		name    string
		nodes   int
		zones   []string
		want    map[string]string
		wantErr bool
	}{
		{name: "no zones", nodes: 2},
		{name: "round robin", nodes: 3, zones: []string{"a", "b"}, want: map[string]string{"tranche-1": "a", "tranche-2": "b", "tranche-3": "a"}},
		{name: "no nodes", nodes: 0, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := newState("tx-", tc.nodes, tc.zones)
			if (err != nil) != tc.wantErr {
				t.Fatalf("newState: %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, s.Zones); diff != "" {
				t.Errorf("zones (-want +got):\n%s", diff)
			}
			if len(s.Topology.Nodes) != tc.nodes || s.Topology.Nodes[0].Name != "tranche-1" {
				t.Errorf("nodes = %+v", s.Topology.Nodes)
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	s, err := newState("tx-", 2, []string{"z"})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.json")
	if err := saveState(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := cmp.Options{
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	}
	if diff := cmp.Diff(s, got, opts); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestAgentArgs(t *testing.T) {
	a := Agent{Node: "n1", Kubeconfig: "/d/nodes/n1/kubeconfig", ClusterFile: "/d/cluster.json", RootDir: "/d/nodes/n1"}
	want := "agent --kubeconfig /d/nodes/n1/kubeconfig --node-name n1 --cluster-file /d/cluster.json --root-dir /d/nodes/n1 --backend none"
	if got := strings.Join(a.Args(), " "); got != want {
		t.Errorf("Args = %q, want %q", got, want)
	}
	a.Zone, a.LogLevel = "z1", "debug"
	if got := strings.Join(a.Args(), " "); got != want+" --zone z1 --log-level debug" {
		t.Errorf("Args with zone = %q", got)
	}
	a.Zone, a.LogLevel, a.ProxyMode, a.IPVSScheduler = "", "", "ipvs", "wlc"
	if got := strings.Join(a.Args(), " "); got != want+" --proxy-mode ipvs --ipvs-scheduler wlc" {
		t.Errorf("Args with proxy mode = %q", got)
	}
}

func TestProxyModeOf(t *testing.T) {
	for _, tc := range []struct {
		name                string
		flag, flagSched     string
		recorded, recSched  string
		wantMode, wantSched string
	}{
		{name: "new cluster", wantMode: "nftables"},
		{name: "new cluster in iptables", flag: "iptables", wantMode: "iptables"},
		{name: "restart keeps the recorded mode", recorded: "iptables", wantMode: "iptables"},
		{name: "restart switches", flag: "nftables", recorded: "iptables", wantMode: "nftables"},
		{name: "ipvs keeps its scheduler", recorded: "ipvs", recSched: "wlc", wantMode: "ipvs", wantSched: "wlc"},
		{name: "another scheduler", flagSched: "sh", recorded: "ipvs", recSched: "wlc", wantMode: "ipvs", wantSched: "sh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mode, sched := proxyModeOf(Config{ProxyMode: tc.flag, IPVSScheduler: tc.flagSched},
				State{ProxyMode: tc.recorded, IPVSScheduler: tc.recSched})
			if mode != tc.wantMode || sched != tc.wantSched {
				t.Errorf("proxyModeOf = %q, %q; want %q, %q", mode, sched, tc.wantMode, tc.wantSched)
			}
		})
	}
}

// TestStopGroupWaitsForEveryMember stops a script as the README's machines run them: a
// shell that runs a program which needs a moment to stop after SIGTERM. The shell dies
// at SIGTERM at once; StopGroup returns only after the program has stopped on its own
// (it writes a file when it has), not SIGKILLed with the shell gone.
func TestStopGroupWaitsForEveryMember(t *testing.T) {
	dir := t.TempDir()
	stopped := filepath.Join(dir, "stopped")
	program := filepath.Join(dir, "program")
	if err := os.WriteFile(program, []byte(`trap 'sleep 0.3; echo done > "$1"; exit 0' TERM
while :; do sleep 0.05; done
`), 0o755); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")
	cmd := exec.Command("sh", "-ec", `touch "$2"; sh "$1" "$3"
`, "sh", program, ready, stopped)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	for start := time.Now(); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the script did not start")
		}
	}
	time.Sleep(100 * time.Millisecond) // the program set its trap
	StopGroup(cmd.Process.Pid, 10*time.Second)
	<-done
	if _, err := os.Stat(stopped); err != nil {
		t.Errorf("StopGroup returned before the script's program had stopped: %v", err)
	}
	if groupRunning(cmd.Process.Pid) {
		t.Errorf("group %d still runs after StopGroup", cmd.Process.Pid)
	}
}

func TestParseGroup(t *testing.T) {
	g, state, ok := parseGroup("17 (a) b (c) S 1 4242 4242 0 -1")
	if !ok || g != 4242 || state != "S" {
		t.Errorf("parseGroup = %d, %q, %v; want 4242, S, true", g, state, ok)
	}
	if _, _, ok := parseGroup("17 (sleep) S 1"); ok {
		t.Error("parseGroup of a truncated line: ok")
	}
}
