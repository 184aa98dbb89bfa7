package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/l2announce"
	"github.com/tranche/tranche/internal/overlay"
)

// startAnnouncer makes this node announce on its uplink the LoadBalancer pool addresses
// chosen to it (internal/l2announce, MetalLB's layer 2 mode) until ctx ends. It runs
// beside the pod network across machines only: `tranche up`'s nodes are reached through
// its publisher. nodes reads every Node, client the Services and EndpointSlices. It
// runs in bg: the agent waits for the addresses' release before it exits.
func startAnnouncer(ctx context.Context, bg *sync.WaitGroup, dp *overlay.Netlink, t clusternet.Topology, me clusternet.Node, client, nodes kubernetes.Interface,
	inContact func() bool, log *slog.Logger) error {
	uplink, prefix, _, err := dp.Uplink(me.Underlay)
	if err != nil {
		return err
	}
	adp, err := l2announce.OpenNetlink(t.NodeNamespace(me.Name), uplink)
	if err != nil {
		return fmt.Errorf("load-balancer announcements: %w", err)
	}
	a := l2announce.New(l2announce.Config{NodeName: me.Name, LAN: prefix.Masked(), Nodes: nodes, Services: client,
		Dataplane: adp, InContact: inContact, Logger: log})
	bg.Go(func() {
		defer adp.Close()
		if err := a.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("load-balancer announcements stopped", "err", err)
		}
	})
	return nil
}
