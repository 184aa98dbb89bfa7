package leader

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// fast keeps the tests short while keeping the rules' proportions.
var fast = Timing{LeaseDuration: time.Second, RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}

// candidate runs one Election and counts its terms; active is true while its work runs.
type candidate struct {
	terms    atomic.Int32
	active   atomic.Bool
	returned chan struct{} // closed once Run returned, with err set
	err      error
	cancel   context.CancelFunc
}

func campaign(t *testing.T, client kubernetes.Interface, id string) *candidate {
	t.Helper()
	return campaignWith(t, client, id, fast)
}

func campaignWith(t *testing.T, client kubernetes.Interface, id string, timing Timing) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{returned: make(chan struct{}), cancel: cancel}
	e := &Election{Client: client, Namespace: "kube-system", Name: ControllerManagerLease, Identity: id, Timing: timing}
	go func() {
		defer close(c.returned)
		c.err = e.Run(ctx, func(ctx context.Context) {
			c.terms.Add(1)
			c.active.Store(true)
			<-ctx.Done()
			// A worker finishing its last sync after the lease was lost.
			time.Sleep(50 * time.Millisecond)
			c.active.Store(false)
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-c.returned
	})
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func holder(t *testing.T, client kubernetes.Interface) string {
	t.Helper()
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), ControllerManagerLease, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// TestOneLeaderThenTakeOver: of two candidates only one works at a time and holds the
// lease under its identity; when it stops, its work returns before Run does, and the
// other takes over once the lease expired.
func TestOneLeaderThenTakeOver(t *testing.T) {
	// A lease of 2 s: client-go compares the records it reads through their JSON, where
	// the renew time has whole seconds, so a candidate sees renewals 100 ms apart only
	// when the second changes, which can be more than 1 s apart; with fast's 1 s lease b
	// took over from a live a in about one run in fifty.
	timing := fast
	timing.LeaseDuration = 2 * time.Second
	client := fake.NewClientset()
	a := campaignWith(t, client, "host-a_1", timing)
	eventually(t, "a leading", a.active.Load)
	b := campaignWith(t, client, "host-b_2", timing)
	for range 20 {
		time.Sleep(fast.RetryPeriod)
		if b.active.Load() {
			t.Fatal("b works while a holds the lease")
		}
	}
	if h := holder(t, client); h != "host-a_1" {
		t.Fatalf("holderIdentity = %q, want host-a_1", h)
	}
	a.cancel()
	<-a.returned
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.active.Load() {
		t.Fatal("a's Run returned while its work was still running")
	}
	eventually(t, "b taking over", b.active.Load)
	if h := holder(t, client); h != "host-b_2" {
		t.Fatalf("holderIdentity = %q, want host-b_2", h)
	}
}

// releases watches the Lease's updates: each one that clears the holder (a release)
// is counted, and noted when it came while work was still active.
type releases struct {
	count, whileActive atomic.Int32
}

func watchReleases(client *fake.Clientset, active func() bool) *releases {
	r := &releases{}
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		l := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if ptr.Deref(l.Spec.HolderIdentity, "") == "" {
			r.count.Add(1)
			if active() {
				r.whileActive.Add(1)
			}
		}
		return false, nil, nil
	})
	return r
}

// TestReleaseOnStop: a leader that stops gives its lease up once its work returned, and
// the other candidate takes it over at its next retry, long before the lease duration
// (a minute here, beyond the wait) would let it: the holder changes and
// leaseTransitions counts the change.
func TestReleaseOnStop(t *testing.T) {
	slow := Timing{LeaseDuration: time.Minute, RenewDeadline: 40 * time.Second, RetryPeriod: 100 * time.Millisecond}
	client := withResourceVersions(fake.NewClientset())
	var a *candidate
	rel := watchReleases(client, func() bool { return a.active.Load() })
	a = campaignWith(t, client, "host-a_1", slow)
	eventually(t, "a leading", a.active.Load)
	b := campaignWith(t, client, "host-b_2", slow)
	time.Sleep(5 * slow.RetryPeriod)
	if b.active.Load() {
		t.Fatal("b works while a holds the lease")
	}
	a.cancel()
	<-a.returned
	if a.err != nil {
		t.Fatal(a.err)
	}
	if n := rel.count.Load(); n != 1 {
		t.Fatalf("a released its lease %d times on stopping, want once", n)
	}
	if rel.whileActive.Load() != 0 {
		t.Fatal("a released its lease while its work was still running")
	}
	eventually(t, "b taking over the released lease", b.active.Load)
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), ControllerManagerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != "host-b_2" {
		t.Fatalf("holderIdentity = %q, want host-b_2", h)
	}
	if n := ptr.Deref(l.Spec.LeaseTransitions, 0); n != 1 {
		t.Fatalf("leaseTransitions = %d, want 1 (a, then b)", n)
	}
}

// TestNoReleaseWhileWorkRuns: when renewals fail (the API server does not answer
// updates), client-go gives up leading and, with ReleaseOnCancel, tries to release
// before it cancels the work; that release is withheld, so no other candidate can take
// over while the work may still write. The lease then expires as it would without
// releases, and the candidate leads again once updates go through.
func TestNoReleaseWhileWorkRuns(t *testing.T) {
	client := withResourceVersions(fake.NewClientset())
	var failing atomic.Bool
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		l := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if failing.Load() && ptr.Deref(l.Spec.HolderIdentity, "") != "" {
			return true, nil, apierrors.NewServiceUnavailable("etcd does not answer")
		}
		return false, nil, nil
	})
	var a *candidate
	rel := watchReleases(client, func() bool { return a.active.Load() })
	a = campaign(t, client, "host-a_1")
	eventually(t, "a leading", a.active.Load)
	failing.Store(true)
	eventually(t, "a's work stopping after its renewals failed", func() bool { return !a.active.Load() })
	if rel.whileActive.Load() != 0 {
		t.Fatal("a released its lease while its work was still running")
	}
	failing.Store(false)
	eventually(t, "a leading again", func() bool { return a.terms.Load() == 2 && a.active.Load() })
}

// TestLostLeaseStopsWorkThenRegains: when another holder takes the lease, the work's
// context ends within the renew deadline and the work returns; once the other holder's
// lease expires, the candidate wins again and its work restarts.
func TestLostLeaseStopsWorkThenRegains(t *testing.T) {
	client := withResourceVersions(fake.NewClientset())
	a := campaign(t, client, "host-a_1")
	eventually(t, "a leading", a.active.Load)
	leases := client.CoordinationV1().Leases("kube-system")
	l, err := leases.Get(context.Background(), ControllerManagerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Spec.HolderIdentity = ptr.To("thief")
	now := metav1.NewMicroTime(time.Now())
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's work stopping after the lease was taken", func() bool { return !a.active.Load() })
	if h := holder(t, client); h != "thief" {
		t.Fatalf("a overwrote the thief's lease: holder %q", h)
	}
	// The thief never renews: a wins again after the lease duration.
	eventually(t, "a leading again", func() bool { return a.terms.Load() == 2 && a.active.Load() })
}

// withResourceVersions makes the fake refuse a Lease update whose resourceVersion is
// not the stored one, as the API server does; leaderelection's renewal relies on it to
// notice that someone else wrote the lease.
func withResourceVersions(client *fake.Clientset) *fake.Clientset {
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	client.PrependReactor("update", "leases", func(action clienttesting.Action) (bool, runtime.Object, error) {
		l := action.(clienttesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := client.Tracker().Get(gvr, l.Namespace, l.Name)
		if err != nil {
			return true, nil, err
		}
		rv := cur.(*coordinationv1.Lease).ResourceVersion
		if l.ResourceVersion != rv {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, errors.New("the object has been modified"))
		}
		n, _ := strconv.Atoi(rv)
		l.ResourceVersion = strconv.Itoa(n + 1)
		return true, l, client.Tracker().Update(gvr, l, l.Namespace)
	})
	return client
}

func TestTimingValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Timing
		want string
	}{
		{"defaults", DefaultTiming(), ""},
		{"zero", Timing{}, "greater than zero"},
		{"lease not above renew", Timing{LeaseDuration: 10 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: time.Second}, "--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)"},
		{"renew too close to retry", Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second}, "--leader-elect-renew-deadline (2s) must be greater than 1.2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.t.Validate()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Validate() = %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	a, err := Identity()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Identity()
	if a == b || !strings.Contains(a, "_") {
		t.Fatalf("identities %q and %q: want <hostname>_<uuid>, unique per call", a, b)
	}
}

// countActions counts the client's actions of verb on Leases from now on.
func countActions(client *fake.Clientset, verb string) *atomic.Int32 {
	n := &atomic.Int32{}
	client.PrependReactor(verb, "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return n
}

// TestRenewalsOncePerRetryPeriod: the elector runs pollsPerRetry times per RetryPeriod,
// so the other candidate reads the lease that often (and sees a renewal or the expiry
// that early), while the leader still writes its renewal once per RetryPeriod.
func TestRenewalsOncePerRetryPeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 6 s")
	}
	second := Timing{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second}
	client := fake.NewClientset()
	a := campaignWith(t, client, "host-a_1", second)
	eventually(t, "a leading", a.active.Load)
	campaignWith(t, client, "host-b_2", second)
	time.Sleep(time.Second)
	updates, gets := countActions(client, "update"), countActions(client, "get")
	time.Sleep(5 * second.RetryPeriod)
	// Once per RetryPeriod is 5 in 5 s; every run of the elector (200 to 440 ms apart)
	// would be 11 to 25.
	if n := updates.Load(); n < 3 || n > 7 {
		t.Errorf("%d lease updates in 5 retry periods, want one per retry period", n)
	}
	// b's reads: 11 to 25 in 5 s; once per retry period (1 to 2.2 s, upstream's pace)
	// would be 2 to 5.
	if n := gets.Load(); n < 10 {
		t.Errorf("%d lease reads in 5 retry periods, want about %d per retry period", n, pollsPerRetry)
	}
	if h := holder(t, client); h != "host-a_1" {
		t.Errorf("holderIdentity = %q, want host-a_1", h)
	}
}

// TestThrottledLockWritesWhatChanged: only a renewal (the renew time alone) of the
// record last written, within the period, is held back; any other change, a failed
// write's retry and a renewal after the period are written.
func TestThrottledLockWritesWhatChanged(t *testing.T) {
	client := fake.NewClientset()
	updates := countActions(client, "update")
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, "kube-system", "x", client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: "a"})
	if err != nil {
		t.Fatal(err)
	}
	l := &throttledLock{Interface: inner, every: time.Hour}
	ctx := context.Background()
	now := metav1.NewTime(time.Now())
	r := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
	if err := l.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Get(ctx); err != nil {
		t.Fatal(err)
	}
	r.RenewTime = metav1.NewTime(now.Add(time.Second))
	if err := l.Update(ctx, r); err != nil || updates.Load() != 0 {
		t.Fatalf("a renewal within the period: %v, %d updates sent, want none", err, updates.Load())
	}
	r.LeaderTransitions++
	if err := l.Update(ctx, r); err != nil || updates.Load() != 1 {
		t.Fatalf("a changed record: %v, %d updates sent, want 1", err, updates.Load())
	}
	l.every = 0
	r.RenewTime = metav1.NewTime(now.Add(2 * time.Second))
	if err := l.Update(ctx, r); err != nil || updates.Load() != 2 {
		t.Fatalf("a renewal after the period: %v, %d updates sent, want 2", err, updates.Load())
	}
	l.every = time.Hour
	released := r
	released.HolderIdentity = ""
	if err := l.Update(ctx, released); err != nil || updates.Load() != 3 {
		t.Fatalf("a release: %v, %d updates sent, want 3", err, updates.Load())
	}
}
