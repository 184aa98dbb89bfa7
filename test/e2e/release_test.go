package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
)

// TestLeaseReleasedOnSIGTERM runs two servers over one external etcd and stops the
// elected one gracefully (SIGTERM): it gives up its kube-controller-manager and
// kube-scheduler Leases once its controllers stopped (client-go's ReleaseOnCancel: the
// holder cleared, leaseDurationSeconds 1), and the other server takes each over at its
// next retry, without waiting out the 15 s lease duration. Seen through a watch on the
// survivor: a release record, then the survivor as holder with leaseTransitions one
// higher.
func TestLeaseReleasedOnSIGTERM(t *testing.T) {
	t.Parallel()
	etcdURL := startEtcd(t)
	port := portFreeOn(t, "127.0.0.21", "127.0.0.22")
	a := startHAServer(t, "tre2e-rel-a", "127.0.0.21:"+port, "10.240.0.21", etcdURL, nil)
	b := startHAServer(t, "tre2e-rel-b", "127.0.0.22:"+port, "10.240.0.22", etcdURL, a)
	servers := []*haServer{a, b}
	clients := []kubernetes.Interface{a.client(t), b.client(t)}
	leases := []string{"kube-controller-manager", "kube-scheduler"}

	// Both leases held by one server (each is elected on its own: they may differ).
	holder := map[string]int{}
	for _, lease := range leases {
		eventually(t, 60*time.Second, "lease kube-system/"+lease+" held", func() (bool, string) {
			h := leaseHolder(clients[0], lease)
			for i, s := range servers {
				if strings.HasPrefix(h, s.host+"_") {
					holder[lease] = i
					return true, h
				}
			}
			return false, h
		})
	}
	// Stop the controller manager's leader; when it holds the scheduler's lease too,
	// both are checked, else only the controller manager's.
	li := holder["kube-controller-manager"]
	leader, survivor, sc := servers[li], servers[1-li], clients[1-li]
	var watched []string
	for _, lease := range leases {
		if holder[lease] == li {
			watched = append(watched, lease)
		}
	}
	before := map[string]int32{}
	watches := map[string]watch.Interface{}
	for _, lease := range watched {
		w, l := followLease(t, sc, lease, leader.host)
		defer w.Stop()
		watches[lease], before[lease] = w, ptr.Deref(l.Spec.LeaseTransitions, 0)
	}

	stopped := time.Now()
	if err := leader.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leader.done:
	case <-time.After(45 * time.Second):
		t.Fatalf("%s did not exit within 45s of SIGTERM", leader.host)
	}
	if code := leader.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s exited with %d after SIGTERM, want 0", leader.host, code)
	}
	t.Logf("SIGTERM to %s; it exited %.1fs later", leader.host, time.Since(stopped).Seconds())

	for _, lease := range watched {
		released, took := false, time.Duration(0)
		deadline := time.After(60 * time.Second)
	follow:
		for {
			select {
			case ev, ok := <-watches[lease].ResultChan():
				if !ok {
					t.Fatalf("lease %s: the watch ended", lease)
				}
				l, isLease := ev.Object.(*coordinationv1.Lease)
				if !isLease {
					t.Logf("lease %s: %s event %v", lease, ev.Type, ev.Object)
					continue
				}
				h := ptr.Deref(l.Spec.HolderIdentity, "")
				switch {
				case h == "":
					if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d != 1 {
						t.Fatalf("lease %s released with leaseDurationSeconds %d, want 1 (client-go's release record)", lease, d)
					}
					released = true
				case strings.HasPrefix(h, survivor.host+"_"):
					if !released {
						t.Fatalf("lease %s: %s took it over without %s releasing it", lease, survivor.host, leader.host)
					}
					if got, want := ptr.Deref(l.Spec.LeaseTransitions, 0), before[lease]+1; got != want {
						t.Fatalf("lease %s: leaseTransitions %d after the takeover, want %d", lease, got, want)
					}
					// The survivor's acquireTime, stamped on this host's clock.
					if at := l.Spec.AcquireTime; at != nil {
						took = at.Sub(stopped)
					}
					break follow
				case strings.HasPrefix(h, leader.host+"_"):
					// A last renewal before the stop.
				default:
					t.Fatalf("lease %s held by %q", lease, h)
				}
			case <-deadline:
				t.Fatalf("lease %s: %s did not take it over within 60s of the SIGTERM (released: %v)", lease, survivor.host, released)
			}
		}
		t.Logf("lease %s: released by %s and taken over by %s %.1fs after the SIGTERM (lease duration 15s)", lease, leader.host, survivor.host, took.Seconds())
	}

	// The survivor's controllers write: a new Service gets its EndpointSlice.
	ns := "e2e-lease-release"
	if _, err := sc.CoreV1().Namespaces().Create(context.Background(), &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.CoreV1().Services(ns).Create(context.Background(), makeService("after"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the survivor's EndpointSlice for a new Service", func() (bool, string) {
		return checkOneSliceEach(t, sc, ns)
	})
	if out := leader.logText(); !strings.Contains(out, `msg="stopped leading"`) {
		t.Errorf("%s's log does not say it stopped leading:\n%s", leader.host, tail(out, 2000))
	}
}

// followLease watches kube-system/lease through c from its current version, and returns
// once the watch delivered a renewal by holder (every retry period): from then on it
// sees every change. A retrying watch resumes where it was if the server ends it; a
// watch refused at once as too old (410: the server's watch cache began after the
// version read) is opened again from a fresh read.
func followLease(t *testing.T, c kubernetes.Interface, lease, holder string) (watch.Interface, *coordinationv1.Lease) {
	t.Helper()
	for range 5 {
		l, err := c.CoordinationV1().Leases("kube-system").Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := watchtools.NewRetryWatcherWithContext(context.Background(), l.ResourceVersion, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", lease).String()
				return c.CoordinationV1().Leases("kube-system").Watch(ctx, o)
			}})
		if err != nil {
			t.Fatal(err)
		}
		timeout := time.After(30 * time.Second)
	renewal:
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					break renewal
				}
				if r, isLease := ev.Object.(*coordinationv1.Lease); isLease && strings.HasPrefix(ptr.Deref(r.Spec.HolderIdentity, ""), holder+"_") {
					return w, r
				}
				t.Logf("lease %s: %s event %v", lease, ev.Type, ev.Object)
			case <-timeout:
				t.Fatalf("lease %s: no renewal by %s seen within 30s", lease, holder)
			}
		}
		w.Stop()
	}
	t.Fatalf("lease %s: the watch ended five times before a renewal", lease)
	return nil, nil
}
