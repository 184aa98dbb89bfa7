package agent

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tranche/tranche/internal/clusternet"
)

// TestOverlayNeedsToReadNodes: an overlay whose identity may not list Nodes (a node
// identity) is refused at start, naming the flag that fixes it, before anything in the
// node's namespace changes; --backend none needs nothing.
func TestOverlayNeedsToReadNodes(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "", nil)
	})
	topo := clusternet.Topology{Prefix: "never-made-", UnderlayCIDR: netip.MustParsePrefix("10.240.0.0/24"), APIAddress: netip.MustParseAddr("10.240.0.1"),
		ClusterCIDR: netip.MustParsePrefix("10.244.0.0/16")}
	me := clusternet.Node{Name: "m1", Underlay: netip.MustParseAddr("10.240.0.101"), PodCIDR: netip.MustParsePrefix("10.244.11.0/24")}
	topo.Nodes = []clusternet.Node{me}
	log := slog.New(slog.DiscardHandler)
	_, err := startOverlay(context.Background(), &sync.WaitGroup{}, "vxlan", topo, me, client, nil, nil, log)
	if err == nil || !strings.Contains(err.Error(), "--backend vxlan reads every Node; give it an identity that may (--network-kubeconfig, user system:tranche:node-network)") {
		t.Errorf("startOverlay with a node identity: %v", err)
	}
	if got, err := startOverlay(context.Background(), &sync.WaitGroup{}, "none", topo, me, client, nil, nil, log); err != nil || got.PodMTU != 0 {
		t.Errorf("--backend none: %v, pod MTU %d", err, got.PodMTU)
	}
}
