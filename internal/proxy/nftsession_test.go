package proxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tranche/tranche/internal/netns"
)

// TestNFTSession sends transactions through one nft -i in a namespace of its own: a
// transaction applies, a failing one reports nft's error and applies nothing (not even
// its commands before the failing one), the process is the same across transactions,
// and a transaction from another namespace goes to a new process there. nft's line
// history does not land in $HOME.
func TestNFTSession(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and nft)")
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	var names []string
	for i := range 2 {
		ns := fmt.Sprintf("tp%03d-nfts%d", os.Getpid()%1000, i)
		if err := netns.Create(ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := netns.Delete(ns); err != nil {
				t.Error(err)
			}
		})
		names = append(names, ns)
	}
	s := &nftSession{path: path}
	ctx := context.Background()
	list := func(ns string) string {
		t.Helper()
		var out []byte
		if err := netns.Do(ns, func() error {
			var err error
			out, err = exec.Command(path, "list", "map", "ip", "t", "m").CombinedOutput()
			return err
		}); err != nil {
			t.Fatalf("nft list map: %v: %s", err, out)
		}
		return string(out)
	}
	in := func(ns string, f func()) {
		t.Helper()
		if err := netns.Do(ns, func() error { f(); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	in(names[0], func() {
		if err := s.run(ctx, "add table ip t\nadd map ip t m { type ipv4_addr : ipv4_addr ; }\nadd element ip t m { 10.0.0.1 : 10.1.0.1 }\n"); err != nil {
			t.Errorf("first transaction: %v", err)
		}
	})
	if got := list(names[0]); !strings.Contains(got, "10.0.0.1 : 10.1.0.1") {
		t.Errorf("after the first transaction:\n%s", got)
	}
	pid := s.cmd.Process.Pid
	in(names[0], func() {
		err := s.run(ctx, "add element ip t m { 10.0.0.2 : 10.1.0.2 }\nadd element ip t nosuch { 10.0.0.3 : 10.1.0.3 }\n")
		if err == nil || !strings.Contains(err.Error(), "Error: No such file or directory") || !strings.Contains(err.Error(), "nosuch") {
			t.Errorf("a transaction naming a missing map: %v, want nft's error quoting it", err)
		}
		if errors.Is(err, errSessionUnusable) {
			t.Errorf("nft's refusal reported as the session's: %v", err)
		}
		if err := s.run(ctx, "add element ip t m { 10.0.0.4 : 10.1.0.4 }\n"); err != nil {
			t.Errorf("a transaction after a refused one: %v", err)
		}
	})
	if got := list(names[0]); strings.Contains(got, "10.0.0.2") || !strings.Contains(got, "10.0.0.4 : 10.1.0.4") {
		t.Errorf("the refused transaction applied in part, or the next one did not apply:\n%s", got)
	}
	if s.cmd.Process.Pid != pid {
		t.Errorf("nft -i replaced (pid %d, then %d) by a refused transaction", pid, s.cmd.Process.Pid)
	}
	in(names[1], func() {
		if err := s.run(ctx, "add table ip t\nadd map ip t m { type ipv4_addr : ipv4_addr ; }\nadd element ip t m { 10.0.0.9 : 10.1.0.9 }\n"); err != nil {
			t.Errorf("a transaction from another namespace: %v", err)
		}
	})
	if got := list(names[1]); !strings.Contains(got, "10.0.0.9 : 10.1.0.9") {
		t.Errorf("the other namespace:\n%s", got)
	}
	if got := list(names[0]); strings.Contains(got, "10.0.0.9") {
		t.Errorf("a transaction from the other namespace landed in the first:\n%s", got)
	}
	s.close()
	if _, err := os.Stat(filepath.Join(home, ".nft.history")); err == nil {
		t.Errorf("nft -i wrote its history to $HOME (%s)", home)
	}
}

// TestNFTSessionTooLong checks that a transaction over sessionMaxLine is not sent.
func TestNFTSessionTooLong(t *testing.T) {
	s := &nftSession{path: "/nonexistent/nft"}
	err := s.run(context.Background(), strings.Repeat("x", sessionMaxLine+1))
	if !errors.Is(err, errSessionUnusable) {
		t.Errorf("got %v, want errSessionUnusable", err)
	}
}
