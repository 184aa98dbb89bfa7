package nodeipam

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/tranche/tranche/internal/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

func makeNode(name string, mutate func(*v1.Node)) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if mutate != nil {
		mutate(n)
	}
	return n
}

func withCIDR(cidr string) func(*v1.Node) {
	return func(n *v1.Node) {
		n.Spec.PodCIDR = cidr
		n.Spec.PodCIDRs = []string{cidr}
	}
}

// fixture is a running controller over a fake clientset.
type fixture struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
}

func start(t *testing.T, cluster string, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(10)
	c := New(Config{Client: client, Informers: factory, ClusterCIDR: netip.MustParsePrefix(cluster), Recorder: recorder})
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		factory.Shutdown()
	})
	return &fixture{client: client, recorder: recorder}
}

func (f *fixture) create(t *testing.T, n *v1.Node) {
	t.Helper()
	if _, err := f.client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) delete(t *testing.T, name string) {
	t.Helper()
	if err := f.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCIDRs waits until the named nodes have the given pod CIDRs, in both
// fields, and fails with what they have otherwise.
func (f *fixture) waitCIDRs(t *testing.T, want map[string]string) {
	t.Helper()
	var got map[string]string
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		got = map[string]string{}
		for name := range want {
			n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(n.Spec.PodCIDRs) == 1 && n.Spec.PodCIDRs[0] == n.Spec.PodCIDR {
				got[name] = n.Spec.PodCIDR
			} else {
				got[name] = n.Spec.PodCIDR + " " + strings.Join(n.Spec.PodCIDRs, ",")
			}
		}
		if cmp.Equal(want, got) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pod CIDRs (-want +got):\n%s", cmp.Diff(want, got))
}

func TestAssignsDistinctSubnetsInOrder(t *testing.T) {
	f := start(t, "10.244.0.0/16")
	for _, name := range []string{"node-0", "node-1", "node-2"} {
		f.create(t, makeNode(name, nil))
	}
	f.waitCIDRs(t, map[string]string{
		"node-0": "10.244.0.0/24",
		"node-1": "10.244.1.0/24",
		"node-2": "10.244.2.0/24",
	})
}

func TestReusesFreedSubnet(t *testing.T) {
	f := start(t, "10.244.0.0/16")
	for _, name := range []string{"node-0", "node-1", "node-2"} {
		f.create(t, makeNode(name, nil))
	}
	f.waitCIDRs(t, map[string]string{"node-0": "10.244.0.0/24", "node-1": "10.244.1.0/24", "node-2": "10.244.2.0/24"})
	// Which of node-3 and node-4 gets the freed subnet 1 depends on timing: when the
	// deletion arrives while the worker still handles node-1's own CIDR update, the
	// queue re-adds node-1 only once that sync is done, possibly after node-3. What
	// must hold is that subnet 1 is handed out again and nothing beyond subnet 3 is.
	f.delete(t, "node-1")
	f.create(t, makeNode("node-3", nil))
	f.create(t, makeNode("node-4", nil))
	var got []string
	testutil.Eventually(t, 5*time.Second, "node-3 and node-4 to get subnets", func() bool {
		got = got[:0]
		for _, name := range []string{"node-3", "node-4"} {
			n, err := f.client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, n.Spec.PodCIDR)
		}
		return got[0] != "" && got[1] != ""
	})
	slices.Sort(got)
	if want := []string{"10.244.1.0/24", "10.244.3.0/24"}; !slices.Equal(got, want) {
		t.Errorf("subnets of node-3 and node-4 = %v, want %v (the freed subnet 1 reused)", got, want)
	}
}

func TestResumesFromExistingNodes(t *testing.T) {
	f := start(t, "10.244.0.0/16",
		makeNode("node-0", withCIDR("10.244.0.0/24")),
		makeNode("node-2", withCIDR("10.244.2.0/24")),
		makeNode("new-a", nil),
		makeNode("old", func(n *v1.Node) { n.Spec.PodCIDR = "10.244.1.0/24" }),
	)
	// Subnets 0, 1 (podCIDR only) and 2 are taken before anything is
	// handed out, whatever order the initial list comes in.
	f.waitCIDRs(t, map[string]string{"new-a": "10.244.3.0/24"})
	f.create(t, makeNode("new-b", nil))
	f.waitCIDRs(t, map[string]string{
		"node-0": "10.244.0.0/24",
		"node-2": "10.244.2.0/24",
		"new-a":  "10.244.3.0/24",
		"new-b":  "10.244.4.0/24",
	})
}

func TestFullRangeRecordsEventAndWaitsForFreeSubnet(t *testing.T) {
	f := start(t, "10.244.0.0/23",
		makeNode("node-0", withCIDR("10.244.0.0/24")),
		makeNode("node-1", withCIDR("10.244.1.0/24")),
	)
	f.create(t, makeNode("node-2", nil))
	select {
	case ev := <-f.recorder.Events:
		if want := "Normal CIDRNotAvailable Node node-2 status is now: CIDRNotAvailable"; ev != want {
			t.Fatalf("event %q, want %q", ev, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no CIDRNotAvailable event")
	}
	f.delete(t, "node-0")
	f.waitCIDRs(t, map[string]string{"node-1": "10.244.1.0/24", "node-2": "10.244.0.0/24"})
}
