package nftsession

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
	"github.com/tranche/tranche/internal/testutil"
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
	names := []string{testutil.Netns(t, "nfts0"), testutil.Netns(t, "nfts1")}
	s := NewSession(path)
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
		if err := s.Run(ctx, "add table ip t\nadd map ip t m { type ipv4_addr : ipv4_addr ; }\nadd element ip t m { 10.0.0.1 : 10.1.0.1 }\n"); err != nil {
			t.Errorf("first transaction: %v", err)
		}
	})
	if got := list(names[0]); !strings.Contains(got, "10.0.0.1 : 10.1.0.1") {
		t.Errorf("after the first transaction:\n%s", got)
	}
	pid := s.cmd.Process.Pid
	in(names[0], func() {
		err := s.Run(ctx, "add element ip t m { 10.0.0.2 : 10.1.0.2 }\nadd element ip t nosuch { 10.0.0.3 : 10.1.0.3 }\n")
		if err == nil || !strings.Contains(err.Error(), "Error: No such file or directory") || !strings.Contains(err.Error(), "nosuch") {
			t.Errorf("a transaction naming a missing map: %v, want nft's error quoting it", err)
		}
		if errors.Is(err, ErrUnusable) {
			t.Errorf("nft's refusal reported as the session's: %v", err)
		}
		if err := s.Run(ctx, "add element ip t m { 10.0.0.4 : 10.1.0.4 }\n"); err != nil {
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
		if err := s.Run(ctx, "add table ip t\nadd map ip t m { type ipv4_addr : ipv4_addr ; }\nadd element ip t m { 10.0.0.9 : 10.1.0.9 }\n"); err != nil {
			t.Errorf("a transaction from another namespace: %v", err)
		}
	})
	if got := list(names[1]); !strings.Contains(got, "10.0.0.9 : 10.1.0.9") {
		t.Errorf("the other namespace:\n%s", got)
	}
	if got := list(names[0]); strings.Contains(got, "10.0.0.9") {
		t.Errorf("a transaction from the other namespace landed in the first:\n%s", got)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(home, ".nft.history")); err == nil {
		t.Errorf("nft -i wrote its history to $HOME (%s)", home)
	}
}

// TestNFTSessionTooLong checks that a transaction over sessionMaxLine is not sent.
func TestNFTSessionTooLong(t *testing.T) {
	s := NewSession("/nonexistent/nft")
	err := s.Run(context.Background(), strings.Repeat("x", sessionMaxLine+1))
	if !errors.Is(err, ErrUnusable) {
		t.Errorf("got %v, want ErrUnusable", err)
	}
}

// TestNFTSessionReplaced checks that nft -i is replaced after sessionMaxTransactions
// (interactive nft keeps every line in memory) and that the new one goes on.
func TestNFTSessionReplaced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces and nft)")
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		t.Fatal(err)
	}
	ns := testutil.Netns(t, "nftr")
	s := NewSession(path)
	defer s.Close()
	pids := map[int]bool{}
	if err := netns.Do(ns, func() error {
		if err := s.Run(context.Background(), "add table ip t\nadd set ip t s { type ipv4_addr ; }\n"); err != nil {
			return err
		}
		for i := range sessionMaxTransactions + 1 {
			if err := s.Run(context.Background(), fmt.Sprintf("add element ip t s { 10.0.%d.%d }\n", i/250, i%250+1)); err != nil {
				return fmt.Errorf("transaction %d: %w", i, err)
			}
			pids[s.cmd.Process.Pid] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(pids) != 2 {
		t.Errorf("%d transactions went through %d nft processes, want 2", sessionMaxTransactions+2, len(pids))
	}
}

// BenchmarkNFTSession compares one small transaction (an element replaced in a map)
// through the session with the same through a new `nft -f -` each time, in one
// namespace, in one run:
//
//	go test -run '^$' -bench NFTSession ./internal/nftsession/
func BenchmarkNFTSession(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (network namespaces and nft)")
	}
	path, err := exec.LookPath("nft")
	if err != nil {
		b.Fatal(err)
	}
	ns := testutil.Netns(b, "nftb")
	s := NewSession(path)
	defer s.Close()
	txn := func(i int) string {
		return fmt.Sprintf("delete element ip t m { 10.0.0.1 }\nadd element ip t m { 10.0.0.1 : 10.1.%d.%d }\n", i/250%250, i%250+1)
	}
	for _, how := range []struct {
		name string
		run  func(string) error
	}{
		{"session", func(text string) error { return s.Run(context.Background(), text) }},
		{"nft -f", func(text string) error {
			cmd := exec.Command(path, "-f", "-")
			cmd.Stdin = strings.NewReader(text)
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}},
	} {
		b.Run(how.name, func(b *testing.B) {
			if err := netns.Do(ns, func() error {
				if err := how.run("add table ip t\ndelete table ip t\nadd table ip t\nadd map ip t m { type ipv4_addr : ipv4_addr ; }\nadd element ip t m { 10.0.0.1 : 10.1.0.1 }\n"); err != nil {
					return err
				}
				b.ResetTimer()
				for i := range b.N {
					if err := how.run(txn(i)); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// TestNFTSessionOffWhenNFTDoesNotAnswer: an nft -i that does not report the marker as
// expected (here one that exits at once) is not used again; the caller is told to run
// the transaction another way.
func TestNFTSessionOffWhenNFTDoesNotAnswer(t *testing.T) {
	fakeNFT := filepath.Join(t.TempDir(), "nft")
	if err := os.WriteFile(fakeNFT, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewSession(fakeNFT)
	for i := range 2 {
		if err := s.Run(context.Background(), "add table ip t\n"); !errors.Is(err, ErrUnusable) {
			t.Errorf("run %d: %v, want ErrUnusable", i, err)
		}
		if s.cmd != nil {
			t.Errorf("run %d left a process", i)
		}
	}
	if s.off == nil {
		t.Error("the session is not off")
	}
}
