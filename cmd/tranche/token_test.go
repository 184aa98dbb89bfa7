package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tranche/tranche/internal/bootstraptoken"
)

// TestPrintTokens: kubeadm token list's columns, the secret never shown.
func TestPrintTokens(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	later, earlier := now.Add(23*time.Hour+30*time.Minute), now.Add(-time.Minute)
	var b strings.Builder
	err := printTokens(&b, []bootstraptoken.Info{
		{ID: "abcdef", Expires: &later, Usages: []string{"authentication", "signing"}, Description: "nodes", Groups: []string{bootstraptoken.DefaultGroup}},
		{ID: "old123", Expires: &earlier, Usages: []string{"signing"}},
		{ID: "forevr"},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"TOKEN TTL EXPIRES USAGES DESCRIPTION EXTRA GROUPS",
		"abcdef.<redacted> 23h 2026-01-01T23:30:00Z authentication,signing nodes " + bootstraptoken.DefaultGroup,
		"old123.<redacted> <invalid> 2025-12-31T23:59:00Z signing <none>",
		"forevr.<redacted> <forever> <never> <none>",
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("printed:\n%s", b.String())
	}
	for i, l := range lines {
		if got := strings.Join(strings.Fields(l), " "); got != want[i] {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
}
