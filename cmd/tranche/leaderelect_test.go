package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/server"
)

// TestLeaderElectFlags: election is on by default with --etcd-servers and off with the
// embedded etcd, --leader-elect overrides either way, the durations default to
// kube-controller-manager's, and durations the election cannot work with are refused
// naming the flags.
func TestLeaderElectFlags(t *testing.T) {
	parse := func(etcd bool, args ...string) (server.LeaderElection, error) {
		var l leaderElectFlags
		cmd := &cobra.Command{}
		l.register(cmd)
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		var cfg server.Config
		if etcd {
			cfg.EtcdServers = []string{"http://127.0.0.1:2379"}
		}
		err := l.apply(cmd, &cfg)
		return cfg.LeaderElection, err
	}
	for _, tc := range []struct {
		name    string
		etcd    bool
		args    []string
		enabled bool
		err     string
	}{
		{name: "embedded", enabled: false},
		{name: "external etcd", etcd: true, enabled: true},
		{name: "external, disabled", etcd: true, args: []string{"--leader-elect=false"}, enabled: false},
		{name: "embedded, enabled", args: []string{"--leader-elect"}, enabled: true},
		{name: "lease not above renew", etcd: true, args: []string{"--leader-elect-lease-duration=5s"},
			err: "--leader-elect-lease-duration (5s) must be greater than --leader-elect-renew-deadline (10s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			le, err := parse(tc.etcd, tc.args...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if le.Enabled != tc.enabled {
				t.Fatalf("enabled = %v, want %v", le.Enabled, tc.enabled)
			}
			if le.LeaseDuration != 15*time.Second || le.RenewDeadline != 10*time.Second || le.RetryPeriod != 2*time.Second {
				t.Fatalf("timing = %+v, want 15s/10s/2s", le.Timing)
			}
		})
	}
}
