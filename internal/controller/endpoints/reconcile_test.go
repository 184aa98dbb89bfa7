package endpoints

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const ns = "demo"

func makeService(ns, name string, mutate func(*v1.Service)) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.ServiceSpec{
			Selector:   map[string]string{"app": "web"},
			ClusterIP:  "10.96.0.20",
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

func makePod(ns, name string, mutate func(*v1.Pod)) *v1.Pod {
	var n int
	fmt.Sscanf(name, "pod-%d", &n)
	ip := fmt.Sprintf("10.244.%d.%d", n/250, n%250)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{NodeName: "node-a", Containers: []v1.Container{{Name: "app", Ports: []v1.ContainerPort{
			{Name: "http", ContainerPort: 3000, Protocol: v1.ProtocolTCP},
		}}}},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, PodIP: ip, PodIPs: []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

func notReady(pod *v1.Pod) { pod.Status.Conditions[0].Status = v1.ConditionFalse }

func address(pod *v1.Pod, mutate func(*v1.EndpointAddress)) v1.EndpointAddress {
	node := pod.Spec.NodeName
	a := v1.EndpointAddress{IP: pod.Status.PodIP, NodeName: &node,
		TargetRef: &v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
	if mutate != nil {
		mutate(&a)
	}
	return a
}

func ports(name string, num int32) []v1.EndpointPort {
	return []v1.EndpointPort{{Name: name, Port: num, Protocol: v1.ProtocolTCP}}
}

func makeEndpoints(svc *v1.Service, subsets ...v1.EndpointSubset) *v1.Endpoints {
	return &v1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name, Labels: map[string]string{discovery.LabelSkipMirror: "true"}, Annotations: map[string]string{}},
		Subsets:    subsets,
	}
}

func TestReconcile(t *testing.T) {
	web := makeService(ns, "web", nil)
	pod0, pod1 := makePod(ns, "pod-000", nil), makePod(ns, "pod-001", func(p *v1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 3001 })
	deleting := metav1.NewTime(time.Unix(100, 0))
	tests := []struct {
		name     string
		svc      *v1.Service
		pods     []*v1.Pod
		existing *v1.Endpoints
		want     plan
	}{{
		name: "ready and unready pods, grouped by resolved port",
		svc:  web,
		pods: []*v1.Pod{pod0, pod1, makePod(ns, "pod-002", notReady)},
		want: plan{create: makeEndpoints(web,
			v1.EndpointSubset{Addresses: []v1.EndpointAddress{address(pod0, nil)}, NotReadyAddresses: []v1.EndpointAddress{address(makePod(ns, "pod-002", nil), nil)}, Ports: ports("http", 3000)},
			v1.EndpointSubset{Addresses: []v1.EndpointAddress{address(pod1, nil)}, Ports: ports("http", 3001)},
		)},
	}, {
		name: "publishNotReadyAddresses puts everyone in addresses, terminating included",
		svc:  makeService(ns, "web", func(s *v1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		pods: []*v1.Pod{pod0, makePod(ns, "pod-002", func(p *v1.Pod) { notReady(p); p.DeletionTimestamp = &deleting })},
		want: plan{create: makeEndpoints(web, v1.EndpointSubset{
			Addresses: []v1.EndpointAddress{address(pod0, nil), address(makePod(ns, "pod-002", nil), nil)}, Ports: ports("http", 3000),
		})},
	}, {
		name: "terminating pods are dropped, hostname follows the subdomain rule",
		svc:  web,
		pods: []*v1.Pod{
			makePod(ns, "pod-000", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h0", "web" }),
			makePod(ns, "pod-002", func(p *v1.Pod) { p.DeletionTimestamp = &deleting }),
		},
		want: plan{create: makeEndpoints(web, v1.EndpointSubset{
			Addresses: []v1.EndpointAddress{address(pod0, func(a *v1.EndpointAddress) { a.Hostname = "h0" })}, Ports: ports("http", 3000),
		})},
	}, {
		name:     "unchanged endpoints are not rewritten",
		svc:      web,
		pods:     []*v1.Pod{pod0},
		existing: makeEndpoints(web, v1.EndpointSubset{Addresses: []v1.EndpointAddress{address(pod0, func(a *v1.EndpointAddress) { a.TargetRef.ResourceVersion = "9" })}, Ports: ports("http", 3000)}),
	}, {
		name:     "a readiness flip is one update",
		svc:      web,
		pods:     []*v1.Pod{makePod(ns, "pod-000", notReady)},
		existing: makeEndpoints(web, v1.EndpointSubset{Addresses: []v1.EndpointAddress{address(pod0, nil)}, Ports: ports("http", 3000)}),
		want:     plan{update: makeEndpoints(web, v1.EndpointSubset{NotReadyAddresses: []v1.EndpointAddress{address(pod0, nil)}, Ports: ports("http", 3000)})},
	}, {
		name: "a headless service gets the headless label",
		svc:  makeService(ns, "web", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone; s.Labels = map[string]string{"team": "a"} }),
		want: plan{create: func() *v1.Endpoints {
			ep := makeEndpoints(web)
			ep.Labels[v1.IsHeadlessService], ep.Labels["team"] = "", "a"
			return ep
		}()},
	}, {
		name:     "a deleted service loses its endpoints",
		existing: makeEndpoints(web),
		want:     plan{delete: true},
	}, {
		name:     "a service without selector is left alone",
		svc:      makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = nil }),
		existing: &v1.Endpoints{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reconcile(tc.svc, tc.pods, tc.existing, time.Time{})
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(plan{}), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReconcileTruncatesAt1000(t *testing.T) {
	web := makeService(ns, "web", nil)
	var pods []*v1.Pod
	for i := range 1200 {
		mutate := func(*v1.Pod) {}
		if i%2 == 1 {
			mutate = notReady
		}
		pods = append(pods, makePod(ns, fmt.Sprintf("pod-%04d", i), mutate))
	}
	trigger := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	got := reconcile(web, pods, nil, trigger).create
	if got == nil {
		t.Fatal("no create")
	}
	s := got.Subsets[0]
	if len(s.Addresses) != 600 || len(s.NotReadyAddresses) != 400 {
		t.Errorf("kept %d ready and %d not ready, want 600 and 400", len(s.Addresses), len(s.NotReadyAddresses))
	}
	if got.Annotations[v1.EndpointsOverCapacity] != "truncated" || got.Annotations[v1.EndpointsLastChangeTriggerTime] != "2025-01-01T00:00:00Z" {
		t.Errorf("annotations %v", got.Annotations)
	}
	if again := reconcile(web, pods, got, trigger); again.update == nil {
		t.Errorf("an over-capacity object must be rewritten (Kubernetes' rule), got %+v", again)
	}
}
