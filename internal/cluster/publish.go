package cluster

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tranche/tranche/internal/controller/servicelb"
	"github.com/tranche/tranche/internal/events"
	"github.com/tranche/tranche/internal/logging"
	"github.com/tranche/tranche/internal/publisher"
)

// publisherHost returns the host side of the publisher and pool checked against it:
// the servicelb controller then hands out no address whose port another program
// holds on this machine (another local cluster drawing from the same default pool).
func publisherHost(pool servicelb.Pool) (*publisher.Host, servicelb.Pool) {
	host := publisher.NewHost(nil, nil)
	return host, pool.OnHost(host)
}

// startPublisher runs the host publisher until ctx ends: NodePorts on 127.0.0.1 and
// the addresses of pool on the host, forwarded from inside the underlay namespace,
// listening through host. Its client has no request timeout, which would cut its
// informers' watches.
func startPublisher(ctx context.Context, p paths, underlay string, pool servicelb.Pool, host *publisher.Host, log *slog.Logger) error {
	rc, err := clientcmd.BuildConfigFromFlags("", p.kubeconfig())
	if err != nil {
		return fmt.Errorf("host publisher: admin kubeconfig: %w", err)
	}
	logging.QuietWarnings(rc, log)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("host publisher: %w", err)
	}
	cfg := publisher.Config{Client: client, Namespace: underlay, Host: host, Logger: log.With("component", "publisher"),
		Recorder: events.NewRecorder(ctx, client, "tranche-publisher")}
	if !pool.Empty() {
		cfg.Publishable = pool.Contains
	}
	pub := publisher.New(cfg)
	go func() {
		if err := pub.Run(ctx); err != nil {
			log.Error("host publisher stopped", "err", err)
		}
	}()
	return nil
}
