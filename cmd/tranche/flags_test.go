package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tranche/tranche/internal/cluster"
)

// TestBadLogLevel: every command with --log-level refuses an unknown level, naming the
// flag and the levels, before it starts anything.
func TestBadLogLevel(t *testing.T) {
	for _, tc := range []struct {
		cmd  func() *cobra.Command
		args []string
	}{
		{upCmd, nil},
		{serverCmd, nil},
		{agentCmd, []string{"--node-name", "n", "--kubeconfig", "/nonexistent", "--cluster-file", "/nonexistent", "--root-dir", "/nonexistent"}},
		{shimCmd, []string{"--dir", "/nonexistent", "--runc-root", "/nonexistent"}},
		{dnsCmd, nil},
		{ingressCmd, nil},
		{nodeCmd, []string{"add", "n1", "--data-dir", "/nonexistent"}},
	} {
		cmd := tc.cmd()
		t.Run(cmd.Name(), func(t *testing.T) {
			err := execute(cmd, append(tc.args, "--log-level", "loud")...)
			if err == nil || err.Error() != `--log-level "loud": want debug, info, warn or error` {
				t.Errorf("tranche %s --log-level loud: %v", cmd.Name(), err)
			}
		})
	}
}

// TestClusterName: --name picks the data dir of the named cluster unless --data-dir is
// given, the default name leaves Config.Name empty (the data dir's own name or the
// defaults), and a name that is not a DNS label is refused.
func TestClusterName(t *testing.T) {
	parse := func(args ...string) (cluster.Config, error) {
		var n clusterNameFlags
		var cfg cluster.Config
		cmd := &cobra.Command{}
		n.register(cmd.Flags(), "data")
		if err := cmd.ParseFlags(args); err != nil {
			t.Fatal(err)
		}
		return cfg, n.apply(cmd, &cfg)
	}
	for _, tc := range []struct {
		args          []string
		name, dataDir string
	}{
		{nil, "", cluster.DefaultDataDir(cluster.DefaultName)},
		{[]string{"--name", "dev"}, "dev", cluster.DefaultDataDir("dev")},
		{[]string{"--name", "dev", "--data-dir", "/tmp/x"}, "dev", "/tmp/x"},
		{[]string{"--data-dir", "/tmp/y"}, "", "/tmp/y"},
	} {
		cfg, err := parse(tc.args...)
		if err != nil || cfg.Name != tc.name || cfg.DataDir != tc.dataDir {
			t.Errorf("%v: name %q, data dir %q, %v; want %q, %q", tc.args, cfg.Name, cfg.DataDir, err, tc.name, tc.dataDir)
		}
	}
	if dev := cluster.DefaultDataDir("dev"); strings.HasPrefix(dev, cluster.DefaultDataDir("")+"/") {
		t.Errorf("a named cluster's data dir %s is below the default one's", dev)
	}
	for _, c := range []func() *cobra.Command{upCmd, downCmd, nodeCmd} {
		cmd := c()
		args := []string{"--name", "My_Cluster"}
		if cmd.Name() == "node" {
			args = append([]string{"remove", "n1"}, args...)
		}
		if err := execute(cmd, args...); err == nil || !strings.Contains(err.Error(), `--name "My_Cluster": a cluster name must be a DNS label`) {
			t.Errorf("tranche %s --name My_Cluster: %v", cmd.Name(), err)
		}
	}
}

func execute(cmd *cobra.Command, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	return cmd.Execute()
}
