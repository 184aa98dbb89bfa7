package cluster

import (
	"strings"
	"testing"
)

// TestAgentArgsRegistries: `tranche up --registries FILE` reaches every agent.
func TestAgentArgsRegistries(t *testing.T) {
	a := Agent{Node: "n1", Kubeconfig: "k", ClusterFile: "c", RootDir: "r", Registries: "/etc/tranche/registries.yaml"}
	if got := strings.Join(a.Args(), " "); !strings.HasSuffix(got, " --registries /etc/tranche/registries.yaml") {
		t.Errorf("Args = %q, want --registries at the end", got)
	}
}
