package main

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/server"
)

// TestInFlightFlags: `server` and `up` take kube-apiserver's in-flight flags with its
// defaults, and the values reach server.Config.
func TestInFlightFlags(t *testing.T) {
	for _, cmd := range []*cobra.Command{serverCmd(), upCmd()} {
		for name, def := range map[string]string{"max-requests-inflight": "400", "max-mutating-requests-inflight": "200"} {
			f := cmd.Flags().Lookup(name)
			if f == nil || f.DefValue != def {
				t.Errorf("tranche %s --%s: %+v, want default %s", cmd.Name(), name, f, def)
			}
		}
	}
	var cfg server.Config
	cmd := &cobra.Command{}
	registerInFlightLimits(cmd, &cfg)
	if err := cmd.ParseFlags([]string{"--max-requests-inflight=0", "--max-mutating-requests-inflight=7"}); err != nil {
		t.Fatal(err)
	}
	if cfg.MaxRequestsInFlight != 0 || cfg.MaxMutatingRequestsInFlight != 7 {
		t.Fatalf("parsed: %d read-only, %d mutating", cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight)
	}
}
