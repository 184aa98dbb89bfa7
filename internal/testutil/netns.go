package testutil

import (
	"fmt"
	"os"
	"testing"

	"github.com/tranche/tranche/internal/netns"
)

// Netns creates the network namespace tpNNN-suffix (NNN from the test process's pid)
// for tb and deletes it when tb ends.
func Netns(tb testing.TB, suffix string) string {
	tb.Helper()
	ns := fmt.Sprintf("tp%03d-%s", os.Getpid()%1000, suffix)
	if err := netns.Create(ns); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := netns.Delete(ns); err != nil {
			tb.Error(err)
		}
	})
	return ns
}
