package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/util/certificate"

	"github.com/tranche/tranche/internal/agent/bootstrap"
	"github.com/tranche/tranche/internal/bootstraptoken"
)

// joinFlags are `tranche agent`'s flags for joining with a bootstrap token.
type joinFlags struct {
	server, token, caHash string
	discoveryTimeout      time.Duration
}

func (j *joinFlags) register(f *pflag.FlagSet) {
	f.StringVar(&j.server, "server", "", "API server to join, https://HOST:PORT (with --token)")
	f.StringVar(&j.token, "token", "", "bootstrap token <id>.<secret> to join with (`tranche token create`); the node's certificate then lives under --root-dir")
	f.StringVar(&j.caHash, "ca-cert-hash", "", "sha256:<hex> pin of the cluster CA's public key, as printed by `tranche token create --print-join-command`")
	f.DurationVar(&j.discoveryTimeout, "discovery-timeout", time.Minute, "how long to wait for cluster-info to be signed with the token")
}

// join validates the flags and joins, returning the node's kubeconfig and the
// certificate manager that rotates its certificate.
func (j *joinFlags) join(ctx context.Context, node, dir string, log *slog.Logger) (string, certificate.Manager, error) {
	u, err := url.Parse(j.server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", nil, fmt.Errorf("--server %q: want https://HOST:PORT", j.server)
	}
	tok, err := bootstraptoken.Parse(j.token)
	if err != nil {
		return "", nil, fmt.Errorf("--token: %w", err)
	}
	var hash string
	if j.caHash != "" {
		if hash, err = bootstraptoken.ParseCAHash(j.caHash); err != nil {
			return "", nil, fmt.Errorf("--ca-cert-hash: %w", err)
		}
	}
	return bootstrap.Join(ctx, bootstrap.Config{Server: j.server, Token: tok, CAHash: hash, NodeName: node, Dir: dir,
		DiscoveryTimeout: j.discoveryTimeout, Logger: log})
}
