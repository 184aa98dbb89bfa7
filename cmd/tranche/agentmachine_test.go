package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/tranche/tranche/internal/netns"
)

// TestAgentMachineFlags: without --cluster-file an agent must join (the cluster file is
// what `tranche up` gives its own agents), and a joining agent in the host's root
// network namespace is refused, naming --take-host-network, before it contacts anything.
func TestAgentMachineFlags(t *testing.T) {
	err := execute(agentCmd(), "--node-name", "n", "--kubeconfig", "/nonexistent", "--root-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--cluster-file, --root-dir and --kubeconfig, or --server with --token, are required") {
		t.Errorf("agent with a kubeconfig and no cluster file: %v", err)
	}
	if !netns.IsRootNamespace() {
		t.Skip("not in the host's root network namespace")
	}
	err = execute(agentCmd(), "--server", "https://127.0.0.1:1", "--token", "abcdef.0123456789abcdef", "--node-name", "n")
	if !errors.Is(err, netns.ErrRootNamespace) || !strings.Contains(err.Error(), "pass --take-host-network on a machine that is to be the node") {
		t.Errorf("joining agent in the root namespace: %v", err)
	}
}
