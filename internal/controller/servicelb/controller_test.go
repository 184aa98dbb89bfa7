package servicelb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
)

// fixture is a running controller over a fake clientset.
type fixture struct {
	client   *fake.Clientset
	recorder *record.FakeRecorder
	// services is the controller's own informer cache of Services.
	services corelisters.ServiceLister
}

func start(t *testing.T, pool string, objs ...runtime.Object) *fixture {
	t.Helper()
	return startOn(t, MustParsePool(pool), objs...)
}

// startOn is start with a parsed pool (one with a Host, say).
func startOn(t *testing.T, pool Pool, objs ...runtime.Object) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	recorder := record.NewFakeRecorder(100)
	c := New(Config{Client: client, Informers: factory, Pool: pool, Recorder: recorder})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
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
	return &fixture{client: client, recorder: recorder, services: factory.Core().V1().Services().Lister()}
}

// waitCached waits until the controller's cache shows Service default/name with ip in
// its status, so that the next sync starts from the controller's own last write.
func (f *fixture) waitCached(t *testing.T, name, ip string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		svc, err := f.services.Services("default").Get(name)
		if err == nil && len(svc.Status.LoadBalancer.Ingress) > 0 && svc.Status.LoadBalancer.Ingress[0].IP == ip {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller's cache never showed %s at %s: %v %v", name, ip, svc, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// statusWrites renders the status updates the controller made, in order, as
// "name ip/mode" ("name -" for a cleared status).
func (f *fixture) statusWrites() []string {
	var out []string
	for _, a := range f.client.Actions() {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			continue
		}
		svc, ok := u.GetObject().(*v1.Service)
		if !ok {
			continue // a Node's status, written by a test
		}
		w := svc.Name + " -"
		if ing := svc.Status.LoadBalancer.Ingress; len(ing) > 0 {
			w = fmt.Sprintf("%s %s/%s", svc.Name, ing[0].IP, *ing[0].IPMode)
		}
		out = append(out, w)
	}
	return out
}

// waitWrites waits until the status writes are exactly want.
func (f *fixture) waitWrites(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := f.statusWrites()
		if cmp.Equal(want, got) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status writes (-want +got):\n%s", cmp.Diff(want, got))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitEvent waits for an Event containing every part.
func (f *fixture) waitEvent(t *testing.T, parts ...string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	var seen []string
	for {
		select {
		case e := <-f.recorder.Events:
			seen = append(seen, e)
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(e, p) }) {
				return
			}
		case <-timeout:
			t.Fatalf("no event with %q; saw %q", parts, seen)
		}
	}
}

// noEvent fails when an Event is pending in the recorder.
func (f *fixture) noEvent(t *testing.T) {
	t.Helper()
	select {
	case e := <-f.recorder.Events:
		t.Fatalf("unexpected event %q", e)
	default:
	}
}

func TestAssignsOneAddressWithOneWrite(t *testing.T) {
	clusterIP := makeService("internal", 0, func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeClusterIP })
	f := start(t, DefaultPool, makeService("svc-loadbalancer", 1, nil), clusterIP)
	f.waitWrites(t, "svc-loadbalancer 127.0.10.1/Proxy")
	f.waitEvent(t, "Normal", ReasonAssigned, "Assigned 127.0.10.1 from the load-balancer pool 127.0.10.0/24")
	svc, err := f.client.CoreV1().Services("default").Get(context.Background(), "svc-loadbalancer", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := svc.Status.LoadBalancer.Ingress; len(got) != 1 || got[0].IP != "127.0.10.1" {
		t.Fatalf("status.loadBalancer.ingress = %+v", got)
	}
	// An unrelated change of the Service does not write again.
	svc.Labels = map[string]string{"touched": "yes"}
	if _, err := f.client.CoreV1().Services("default").Update(context.Background(), svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.client.ClearActions()
	if _, err := f.client.CoreV1().Services("default").Create(context.Background(), makeService("second", 2, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, "second 127.0.10.2/Proxy")
	f.waitEvent(t, "Normal", ReasonAssigned, "Assigned 127.0.10.2")
	f.noEvent(t)
}

func TestCollisionWaitsAndTakesTheFreedAddress(t *testing.T) {
	f := start(t, "127.0.10.1", makeService("first", 1, nil), makeService("later", 2, nil))
	f.waitWrites(t, "first 127.0.10.1/Proxy")
	f.waitEvent(t, "Warning", ReasonPending, "no address of the load-balancer pool 127.0.10.1 has TCP/80 free: port TCP/80 of 127.0.10.1 is already used by Service default/first")
	// Another Service on other ports shares the address.
	if _, err := f.client.CoreV1().Services("default").Create(context.Background(),
		makeService("dns", 3, withPorts(udp(53))), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, "first 127.0.10.1/Proxy", "dns 127.0.10.1/Proxy")
	f.client.ClearActions()
	if err := f.client.CoreV1().Services("default").Delete(context.Background(), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, "later 127.0.10.1/Proxy")
}

func TestTypeChangeReleasesTheAddress(t *testing.T) {
	f := start(t, "127.0.10.1", makeService("first", 1, nil), makeService("later", 2, nil))
	f.waitWrites(t, "first 127.0.10.1/Proxy")
	first, err := f.client.CoreV1().Services("default").Get(context.Background(), "first", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server drops status.loadBalancer when the type changes.
	first.Spec.Type = v1.ServiceTypeNodePort
	first.Status.LoadBalancer = v1.LoadBalancerStatus{}
	f.client.ClearActions()
	if _, err := f.client.CoreV1().Services("default").Update(context.Background(), first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitWrites(t, "later 127.0.10.1/Proxy")
}

func TestOtherClassesAreLeftAlone(t *testing.T) {
	foreign := makeService("cloud", 1, all(withClass("example.com/cloud"), withStatus("127.0.10.1")))
	f := start(t, DefaultPool, foreign, makeService("ours", 2, withClass(LoadBalancerClass)))
	f.waitWrites(t, "ours 127.0.10.1/Proxy")
}

func TestRestartAnnouncesNothingNew(t *testing.T) {
	f := start(t, "127.0.10.1", makeService("holder", 1, withStatus("127.0.10.1")), makeService("later", 2, nil))
	f.waitEvent(t, "Warning", ReasonPending, "port TCP/80 of 127.0.10.1 is already used by Service default/holder")
	if w := f.statusWrites(); len(w) != 0 {
		t.Fatalf("a restart wrote statuses: %q", w)
	}
	f.noEvent(t)
}

// TestAddressTakenOnTheHostMoves: when the publisher cannot listen because another
// program (another local cluster) took the address, the Service moves to an address
// the host has free, with an Event saying why; other Services are not touched.
func TestAddressTakenOnTheHostMoves(t *testing.T) {
	host := newFakeHost("TCP/127.0.10.1:443")
	f := startOn(t, MustParsePool(DefaultPool).OnHost(host), makeService("web", 1, nil), makeService("tls", 2, withPorts(tcp(443))))
	f.waitWrites(t, "tls 127.0.10.2/Proxy", "web 127.0.10.1/Proxy")
	// The address is taken once the controller knows web holds it (the publisher
	// only listens on addresses the status shows).
	f.waitCached(t, "web", "127.0.10.1")
	f.client.ClearActions()
	host.take("TCP/127.0.10.1:80")
	f.waitWrites(t, "web 127.0.10.3/Proxy")
	f.waitEvent(t, "Normal", ReasonAssigned, "Assigned 127.0.10.3 from the load-balancer pool 127.0.10.0/24; left the previous address: port TCP/80 of 127.0.10.1 is held by another program on the host")
}
