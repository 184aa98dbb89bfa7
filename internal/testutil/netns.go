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
	return NetnsNamed(tb, fmt.Sprintf("tp%03d-%s", os.Getpid()%1000, suffix))
}

// NetnsNamed creates the network namespace name for tb and deletes it when tb ends.
func NetnsNamed(tb testing.TB, name string) string {
	tb.Helper()
	if err := netns.Create(name); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := netns.Delete(name); err != nil {
			tb.Error(err)
		}
	})
	return name
}
