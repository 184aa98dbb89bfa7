package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/knftables"

	"github.com/tranche/tranche/internal/clusternet"
	"github.com/tranche/tranche/internal/nftsession"
	"github.com/tranche/tranche/internal/overlay"
)

// startOverlay makes the node's namespace a node when something other than `tranche up`
// built it (a machine: sysctls, lo, the pod bridge, flannel's ip-masq), prepares the pod network across
// machines with backend (internal/overlay) and keeps it in sync with the Nodes until ctx
// ends. It returns the topology with the pod MTU the backend needs. With
// overlay.BackendNone it does nothing: `tranche up` routes its nodes itself.
// network (may be client) reads every Node; inContact says whether the node still
// reaches the API server (l2announce.Config.InContact). Its goroutines are bg's.
func startOverlay(ctx context.Context, bg *sync.WaitGroup, backend string, t clusternet.Topology, me clusternet.Node, client, network kubernetes.Interface,
	inContact func() bool, log *slog.Logger) (clusternet.Topology, error) {
	if backend == "" || backend == overlay.BackendNone {
		return t, nil
	}
	if network == nil {
		network = client
	}
	// Refused at once rather than a network that never routes: a node identity may read
	// only its own Node (other errors, such as an API server not up yet, are retried by
	// the informer).
	if _, err := network.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); apierrors.IsForbidden(err) {
		return t, fmt.Errorf("--backend %s reads every Node; give it an identity that may (--network-kubeconfig, user system:tranche:node-network): %w", backend, err)
	}
	if err := clusternet.PrepareNode(t, me.Name); err != nil {
		return t, err
	}
	dp, err := overlay.OpenNetlink(t.NodeNamespace(me.Name))
	if err != nil {
		return t, err
	}
	// The agent runs in its node's network namespace: the kernel's nftables there.
	nft, err := nftsession.New(knftables.IPv4Family, overlay.MasqTable)
	if err != nil {
		dp.Close()
		return t, fmt.Errorf("--backend %s: nftables table %s: %w", backend, overlay.MasqTable, err)
	}
	ov, err := overlay.Prepare(overlay.Config{Backend: backend, NodeName: me.Name, PublicIP: me.Underlay, PodCIDR: me.PodCIDR,
		ClusterCIDR: t.ClusterCIDR, Dataplane: dp, NFT: nft, Client: client, Watch: network, Logger: log})
	if err != nil {
		nft.Close()
		dp.Close()
		return t, fmt.Errorf("--backend %s: %w", backend, err)
	}
	t.PodMTU = ov.PodMTU()
	if err := startAnnouncer(ctx, bg, dp, t, me, client, network, inContact, log); err != nil {
		nft.Close()
		dp.Close()
		return t, err
	}
	bg.Go(func() {
		defer dp.Close()
		defer nft.Close()
		if err := ov.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("pod network across machines stopped", "err", err)
		}
	})
	return t, nil
}
