package cluster

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestReserveNode: `node add` registers the Node without a pod subnet and takes the
// one node IPAM writes; a name already registered is refused; when IPAM gives none,
// the error says so and the Node is deleted again.
func TestReserveNode(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	go func() { // node IPAM, as far as this Node is concerned
		for {
			n, err := client.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{})
			if err == nil {
				n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.7.0/24", []string{"10.244.7.0/24"}
				if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err == nil {
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	cidr, err := reserveNode(ctx, client, "extra", 10*time.Second)
	if err != nil || cidr != netip.MustParsePrefix("10.244.7.0/24") {
		t.Fatalf("reserveNode = %v, %v; want node IPAM's 10.244.7.0/24", cidr, err)
	}

	if _, err := reserveNode(ctx, client, "extra", time.Second); err == nil || !strings.Contains(err.Error(), `node "extra": a Node of that name is already registered`) {
		t.Errorf("reserving a registered name: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "extra", metav1.GetOptions{}); err != nil {
		t.Errorf("the refused reservation deleted the registered Node: %v", err)
	}

	_, err = reserveNode(ctx, client, "lonely", 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), `node "lonely": node IPAM gave its Node no pod subnet within 300ms`) {
		t.Errorf("no subnet from node IPAM: %v", err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "lonely", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Node left after a failed reservation: %v", err)
	}
}
