package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/server"
)

// TestNodeMonitorGracePeriodFlag: the grace period defaults to kube-controller-manager's
// 50 s, takes a duration, and a period that is not positive is refused naming the flag.
func TestNodeMonitorGracePeriodFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want time.Duration
		err  string
	}{
		{name: "default", want: 50 * time.Second},
		{name: "set", args: []string{"--node-monitor-grace-period=12s"}, want: 12 * time.Second},
		{name: "zero", args: []string{"--node-monitor-grace-period=0s"},
			err: `invalid argument "0s" for "--node-monitor-grace-period" flag: must be positive, got 0s`},
		{name: "not a duration", args: []string{"--node-monitor-grace-period=soon"},
			err: `invalid argument "soon" for "--node-monitor-grace-period" flag`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg server.Config
			cmd := &cobra.Command{}
			registerNodeMonitorGracePeriod(cmd, &cfg)
			err := cmd.ParseFlags(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.NodeMonitorGracePeriod != tc.want {
				t.Fatalf("grace period = %s, want %s", cfg.NodeMonitorGracePeriod, tc.want)
			}
		})
	}
}
