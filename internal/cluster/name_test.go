package cluster

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tranche/tranche/internal/controller/servicelb"
)

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"tranche", "dev", "a", "team-2", strings.Repeat("x", 63)} {
		if err := ValidateName(ok); err != nil {
			t.Errorf("ValidateName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Dev", "-a", "a-", "a.b", "a_b", "a/b", strings.Repeat("x", 64)} {
		err := ValidateName(bad)
		if err == nil || !strings.Contains(err.Error(), `--name "`+bad+`": a cluster name must be a DNS label`) {
			t.Errorf("ValidateName(%q) = %v, want an error naming --name", bad, err)
		}
	}
}

func TestDataDirs(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"", "/var/lib/tranche"},
		{DefaultName, "/var/lib/tranche"},
		{"dev", "/var/lib/tranche-dev"},
	} {
		if got := dataDirBeside("/var/lib/tranche", tc.name); got != tc.want {
			t.Errorf("dataDirBeside(%q) = %s, want %s", tc.name, got, tc.want)
		}
	}
	for dir, want := range map[string]string{"/var/lib/tranche": "tranche", "/var/lib/tranche-dev": "dev", "/tmp/trup-42/": "trup-42"} {
		if got := nameFromDir(dir); got != want {
			t.Errorf("nameFromDir(%s) = %s, want %s", dir, got, want)
		}
	}
}

// TestChooseAddresses: the default cluster keeps today's defaults whatever runs; another
// name gets the first prefix, port and pool no other cluster holds, and prefixes never
// begin one another.
func TestChooseAddresses(t *testing.T) {
	none := taken{prefix: func(string) bool { return false }, port: func(int) bool { return false }, pool: func(netip.Addr) bool { return false }}
	all := taken{prefix: func(string) bool { return true }, port: func(int) bool { return true }, pool: func(netip.Addr) bool { return true }}
	for _, tk := range []taken{none, all} {
		got, err := chooseAddresses(DefaultName, tk)
		if want := (addresses{prefix: "tr-", listen: "127.0.0.1:6443", pool: servicelb.DefaultPool}); err != nil || got != want {
			t.Errorf("default cluster: %+v, %v; want %+v", got, err, want)
		}
	}
	got, err := chooseAddresses("dev", none)
	if err != nil || got.prefix != namedPrefix("dev", 0) || got.listen != "127.0.0.1:6444" || got.pool != "127.0.11.0/24" {
		t.Errorf("dev on a free machine: %+v, %v", got, err)
	}
	busy := taken{
		prefix: func(p string) bool { return p == namedPrefix("dev", 0) },
		port:   func(p int) bool { return p < 6450 },
		pool: func(a netip.Addr) bool {
			return servicelb.MustParsePool("127.0.11.0/24,127.0.12.7").Contains(a)
		},
	}
	got, err = chooseAddresses("dev", busy)
	if err != nil || got.prefix != namedPrefix("dev", 1) || got.listen != "127.0.0.1:6450" || got.pool != "127.0.13.0/24" {
		t.Errorf("dev on a busy machine: %+v, %v", got, err)
	}
	if _, err := chooseAddresses("dev", all); err == nil || !strings.Contains(err.Error(), "--netns-prefix") {
		t.Errorf("dev on a full machine: %v", err)
	}
	seen := map[string]string{}
	for _, name := range []string{"a", "b", "dev", "prod", "team-2", "x"} {
		p := namedPrefix(name, 0)
		if len(p) != len("tn000000-") || !strings.HasPrefix(p, "tn") || !strings.HasSuffix(p, "-") || strings.HasPrefix(p, DefaultPrefix) {
			t.Errorf("namedPrefix(%s) = %q", name, p)
		}
		if other, ok := seen[p]; ok {
			t.Errorf("%s and %s share the prefix %s", name, other, p)
		}
		seen[p] = name
	}
}

// TestKnown: a stopped cluster in a data dir is listed from its cluster.json, with the
// API address of its kubeconfig when it records none.
func TestKnown(t *testing.T) {
	dir := t.TempDir()
	s, err := newState("tx-", 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := saveState(filepath.Join(dir, "cluster.json"), s); err != nil {
		t.Fatal(err)
	}
	kc := "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k, user: u}}]\n" +
		"clusters: [{name: k, cluster: {server: 'https://127.0.0.1:7443'}}]\nusers: [{name: u, user: {}}]\n"
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	info, ok := inspect(dir)
	if !ok || info.Name != filepath.Base(dir) || info.Running() || info.Nodes != 2 || info.Listen != "127.0.0.1:7443" || info.Prefix != "tx-" {
		t.Errorf("inspect: %+v, %v", info, ok)
	}
	pool := "127.0.20.0/24"
	s.Name, s.Listen, s.LoadBalancerPool = "dev", "127.0.0.1:6450", pool
	if err := saveState(filepath.Join(dir, "cluster.json"), s); err != nil {
		t.Fatal(err)
	}
	if info, _ := inspect(dir); info.Name != "dev" || info.Listen != "127.0.0.1:6450" || info.Pool != pool {
		t.Errorf("inspect with a recorded name and addresses: %+v", info)
	}
	if _, ok := inspect(t.TempDir()); ok {
		t.Error("an empty directory is a cluster")
	}
}

// TestOpenUpAddresses: explicit addresses win, then the recorded ones, then the name's
// defaults; a data dir of another name is refused.
func TestOpenUpAddresses(t *testing.T) {
	dir := t.TempDir()
	r, err := openUp(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if want := (addresses{prefix: DefaultPrefix, listen: DefaultListen, pool: servicelb.DefaultPool}); r.addr != want || r.name != "" {
		t.Errorf("fresh default cluster: %+v %q, want %+v", r.addr, r.name, want)
	}
	s, err := newState("tx-", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Name, s.Listen, s.LoadBalancerPool = "dev", "127.0.0.1:7000", NoPool
	if err := saveState(filepath.Join(dir, "cluster.json"), s); err != nil {
		t.Fatal(err)
	}
	r, err = openUp(Config{DataDir: dir})
	if want := (addresses{prefix: "tx-", listen: "127.0.0.1:7000", pool: ""}); err != nil || r.addr != want || r.name != "dev" {
		t.Errorf("recorded: %+v %q %v, want %+v", r.addr, r.name, err, want)
	}
	pool := "127.0.30.5"
	cfg := Config{Name: "dev", DataDir: dir, Prefix: "ty-", LoadBalancerPool: &pool}
	cfg.Server.Listen = "127.0.0.1:7001"
	r, err = openUp(cfg)
	if want := (addresses{prefix: "ty-", listen: "127.0.0.1:7001", pool: pool}); err != nil || r.addr != want {
		t.Errorf("explicit: %+v %v, want %+v", r.addr, err, want)
	}
	if _, err := openUp(Config{Name: "prod", DataDir: dir}); err == nil || !strings.Contains(err.Error(), `holds the cluster "dev", not "prod"`) {
		t.Errorf("another name on dev's data dir: %v", err)
	}
}
