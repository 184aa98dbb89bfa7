package main

import "testing"

// TestBadBackend: `tranche agent --backend` refuses an unknown backend, naming the flag
// and the backends, before it starts anything.
func TestBadBackend(t *testing.T) {
	err := execute(agentCmd(), "--node-name", "n", "--kubeconfig", "/nonexistent", "--cluster-file", "/nonexistent",
		"--root-dir", "/nonexistent", "--backend", "udp")
	if err == nil || err.Error() != `--backend "udp": want one of vxlan, host-gw, none` {
		t.Errorf("tranche agent --backend udp: %v", err)
	}
}
