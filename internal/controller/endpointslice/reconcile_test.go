package endpointslice

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
			Selector:   map[string]string{"app": name},
			ClusterIP:  "10.96.0.20",
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{
				Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	if mutate != nil {
		mutate(svc)
	}
	return svc
}

// makePod returns a running, ready pod of app "web" on node-a; its IP is
// derived from the name's index, e.g. pod-007 → 10.244.0.7.
func makePod(ns, name string, mutate func(*v1.Pod)) *v1.Pod {
	var n int
	fmt.Sscanf(name, "pod-%d", &n)
	ip := fmt.Sprintf("10.244.%d.%d", n/250, n%250)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			NodeName: "node-a",
			Containers: []v1.Container{{Name: "app", Ports: []v1.ContainerPort{
				{Name: "http", ContainerPort: 3000, Protocol: v1.ProtocolTCP},
			}}},
		},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			PodIP:      ip,
			PodIPs:     []v1.PodIP{{IP: ip}},
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

func makePods(from, to int, mutate func(*v1.Pod)) []*v1.Pod {
	var pods []*v1.Pod
	for i := from; i < to; i++ {
		pods = append(pods, makePod(ns, fmt.Sprintf("pod-%03d", i), mutate))
	}
	return pods
}

func makeNode(name, zone string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelTopologyZone: zone}}}
}

var testNodes = map[string]*v1.Node{"node-a": makeNode("node-a", "zone-a"), "node-b": makeNode("node-b", "zone-b")}

func notReady(pod *v1.Pod) { pod.Status.Conditions[0].Status = v1.ConditionFalse }

// endpoint is what reconcile makes of a ready pod built by makePod.
func endpoint(pod *v1.Pod, mutate func(*discovery.Endpoint)) discovery.Endpoint {
	node, zone := pod.Spec.NodeName, testNodes[pod.Spec.NodeName].Labels[v1.LabelTopologyZone]
	ep := discovery.Endpoint{
		Addresses:  []string{pod.Status.PodIP},
		Conditions: discovery.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		NodeName:   &node,
		Zone:       &zone,
		TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if mutate != nil {
		mutate(&ep)
	}
	return ep
}

func port(name string, num int32) discovery.EndpointPort {
	proto := v1.ProtocolTCP
	return discovery.EndpointPort{Name: &name, Port: &num, Protocol: &proto}
}

// slice builds an expected slice of svc; name "" means one to be created.
func slice(svc *v1.Service, name string, ports []discovery.EndpointPort, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	s := newSlice(svc, ports, discovery.AddressTypeIPv4)
	s.Name = name
	s.Endpoints = append([]discovery.Endpoint{}, eps...)
	return s
}

func endpoints(pods []*v1.Pod) []discovery.Endpoint {
	var eps []discovery.Endpoint
	for _, p := range pods {
		eps = append(eps, endpoint(p, nil))
	}
	return eps
}

func ptr[T any](v T) *T { return &v }

// applyPlan returns the slices that exist once p is written, naming
// created slices like the API server would.
func applyPlan(existing []*discovery.EndpointSlice, p plan) []*discovery.EndpointSlice {
	out := finalSlices(existing, p)
	for i, s := range out {
		if s.Name == "" {
			s = s.DeepCopy()
			s.Name = fmt.Sprintf("%sgen%d", s.GenerateName, i)
			out[i] = s
		}
	}
	return out
}

var planCmp = cmp.Options{cmp.AllowUnexported(plan{}), cmpopts.EquateEmpty()}

func TestReconcile(t *testing.T) {
	web := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	named := makeService(ns, "web", func(s *v1.Service) {
		s.Spec.Selector = map[string]string{"app": "web"}
		s.Spec.Ports[0].TargetPort = intstr.FromString("http")
	})
	pod0, pod1 := makePod(ns, "pod-000", nil), makePod(ns, "pod-001", func(p *v1.Pod) {
		p.Spec.Containers[0].Ports[0].ContainerPort = 3001
	})
	http8080 := []discovery.EndpointPort{port("http", 8080)}
	deleting := metav1.NewTime(time.Unix(100, 0))

	tests := []struct {
		name     string
		svc      *v1.Service
		pods     []*v1.Pod
		existing []*discovery.EndpointSlice
		want     plan
	}{{
		name: "one ready pod gets one slice",
		svc:  web, pods: []*v1.Pod{pod0},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, nil))}},
	}, {
		name: "named target ports resolving to 3000 and 3001 make two slices",
		svc:  named, pods: []*v1.Pod{pod0, pod1},
		want: plan{create: []*discovery.EndpointSlice{
			slice(named, "", []discovery.EndpointPort{port("http", 3000)}, endpoint(pod0, nil)),
			slice(named, "", []discovery.EndpointPort{port("http", 3001)}, endpoint(pod1, nil)),
		}},
	}, {
		name: "a pod without the named port lands in the slice without that port",
		svc: makeService(ns, "web", func(s *v1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.Ports = []v1.ServicePort{
				{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Port: 9090, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(9090)},
			}
		}),
		pods: []*v1.Pod{pod0, makePod(ns, "pod-002", func(p *v1.Pod) { p.Spec.Containers[0].Ports = nil })},
		want: plan{create: []*discovery.EndpointSlice{
			slice(named, "", []discovery.EndpointPort{port("http", 3000), port("metrics", 9090)}, endpoint(pod0, nil)),
			slice(named, "", []discovery.EndpointPort{port("metrics", 9090)}, endpoint(makePod(ns, "pod-002", nil), nil)),
		}},
	}, {
		name: "an unready pod is listed not ready and not serving",
		svc:  web, pods: []*v1.Pod{makePod(ns, "pod-000", notReady)},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.Conditions.Ready, e.Conditions.Serving = ptr(false), ptr(false)
		}))}},
	}, {
		name: "publishNotReadyAddresses makes an unready pod ready",
		svc: makeService(ns, "web", func(s *v1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.PublishNotReadyAddresses = true
		}),
		pods: []*v1.Pod{makePod(ns, "pod-000", notReady)},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.Conditions.Serving = ptr(false)
		}))}},
	}, {
		name: "a terminating pod stays as a serving, terminating, not ready endpoint",
		svc:  web, pods: []*v1.Pod{makePod(ns, "pod-000", func(p *v1.Pod) { p.DeletionTimestamp = &deleting })},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.Conditions.Ready, e.Conditions.Terminating = ptr(false), ptr(true)
		}))}},
	}, {
		name: "terminal pods and pods without an IP are left out",
		svc:  web,
		pods: []*v1.Pod{
			makePod(ns, "pod-000", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }),
			makePod(ns, "pod-001", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed }),
			makePod(ns, "pod-002", func(p *v1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", []discovery.EndpointPort{})}},
	}, {
		name: "hostname is set only when the subdomain is the service name",
		svc:  web,
		pods: []*v1.Pod{
			makePod(ns, "pod-000", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h0", "web" }),
			makePod(ns, "pod-001", func(p *v1.Pod) { p.Spec.Hostname, p.Spec.Subdomain = "h1", "other" }),
		},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080,
			endpoint(pod0, func(e *discovery.Endpoint) { e.Hostname = ptr("h0") }),
			endpoint(makePod(ns, "pod-001", nil), nil),
		)}},
	}, {
		name: "a selector matching nothing gets one empty slice without ports",
		svc:  web,
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", []discovery.EndpointPort{})}},
	}, {
		name:     "an existing placeholder is kept",
		svc:      web,
		existing: []*discovery.EndpointSlice{slice(web, "web-p", []discovery.EndpointPort{})},
	}, {
		name:     "a placeholder is reused for the first endpoints",
		svc:      web,
		pods:     []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{slice(web, "web-p", []discovery.EndpointPort{})},
		want:     plan{update: []*discovery.EndpointSlice{slice(web, "web-p", http8080, endpoint(pod0, nil))}},
	}, {
		name: "a port change turns create plus delete into one update",
		svc:  web, pods: []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{slice(web, "web-a", []discovery.EndpointPort{port("http", 9999)}, endpoint(pod0, nil))},
		want:     plan{update: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))}},
	}, {
		name: "slices managed by others are not touched",
		svc:  web, pods: []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := slice(web, "web-mine-not", http8080, endpoint(pod1, nil))
			s.Labels[discovery.LabelManagedBy] = "someone-else"
			return s
		}()},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, nil))}},
	}, {
		name: "a slice deleted behind our back is recreated",
		svc:  web,
		pods: []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := slice(web, "web-a", http8080)
			s.DeletionTimestamp = &deleting
			return s
		}()},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, nil))}},
	}, {
		name:     "a service without selector loses its managed slices",
		svc:      makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = nil }),
		existing: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))},
		want:     plan{delete: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))}},
	}, {
		name:     "a deleted service loses its managed slices",
		existing: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))},
		want:     plan{delete: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))}},
	}, {
		name: "a pod on an unknown node is skipped",
		svc:  web, pods: []*v1.Pod{makePod(ns, "pod-000", func(p *v1.Pod) { p.Spec.NodeName = "ghost" })},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", []discovery.EndpointPort{})}, skipped: []string{"demo/pod-000"}},
	}, {
		name: "PreferSameZone hints every ready endpoint with its zone",
		svc: makeService(ns, "web", func(s *v1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.TrafficDistribution = ptr(v1.ServiceTrafficDistributionPreferSameZone)
		}),
		pods: []*v1.Pod{pod0, makePod(ns, "pod-002", func(p *v1.Pod) { p.Spec.NodeName = "node-b"; notReady(p) })},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080,
			endpoint(pod0, func(e *discovery.Endpoint) {
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
			}),
			endpoint(makePod(ns, "pod-002", func(p *v1.Pod) { p.Spec.NodeName = "node-b" }), func(e *discovery.Endpoint) {
				e.Conditions.Ready, e.Conditions.Serving = ptr(false), ptr(false)
			}),
		)}},
	}, {
		name: "PreferSameNode hints zone and node",
		svc: makeService(ns, "web", func(s *v1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Spec.TrafficDistribution = ptr(v1.ServiceTrafficDistributionPreferSameNode)
		}),
		pods: []*v1.Pod{pod0},
		want: plan{create: []*discovery.EndpointSlice{slice(web, "", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}, ForNodes: []discovery.ForNode{{Name: "node-a"}}}
		}))}},
	}, {
		name: "stale hints are removed when trafficDistribution goes away",
		svc:  web, pods: []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "zone-a"}}}
		}))},
		want: plan{update: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))}},
	}, {
		name: "service labels are copied, reserved ones are not",
		svc: makeService(ns, "web", func(s *v1.Service) {
			s.Spec.Selector = map[string]string{"app": "web"}
			s.Labels = map[string]string{"team": "a", discovery.LabelManagedBy: "me"}
		}),
		pods:     []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, nil))},
		want: plan{update: []*discovery.EndpointSlice{func() *discovery.EndpointSlice {
			s := slice(web, "web-a", http8080, endpoint(pod0, nil))
			s.Labels["team"] = "a"
			return s
		}()}},
	}, {
		name: "nothing changed, nothing written",
		svc:  web, pods: []*v1.Pod{pod0},
		existing: []*discovery.EndpointSlice{slice(web, "web-a", http8080, endpoint(pod0, func(e *discovery.Endpoint) {
			e.TargetRef.ResourceVersion = "17"
		}))},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reconcile(tc.svc, tc.pods, testNodes, tc.existing, 100, time.Time{})
			if diff := cmp.Diff(tc.want, got, planCmp); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			if tc.svc == nil {
				return
			}
			again := reconcile(tc.svc, tc.pods, testNodes, applyPlan(tc.existing, got), 100, time.Time{})
			if !again.empty() {
				t.Errorf("second reconcile is not a no-op: %d creates, %d updates, %d deletes",
					len(again.create), len(again.update), len(again.delete))
			}
		})
	}
}

// sizes returns the endpoint counts of slices, in order.
func sizes(slices []*discovery.EndpointSlice) []int {
	var out []int
	for _, s := range slices {
		out = append(out, len(s.Endpoints))
	}
	return out
}

func TestReconcilePacking(t *testing.T) {
	web := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	http8080 := []discovery.EndpointPort{port("http", 8080)}
	sliceA := slice(web, "web-a", http8080, endpoints(makePods(0, 100, nil))...)
	sliceB := slice(web, "web-b", http8080, endpoints(makePods(100, 150, nil))...)
	flipped := makePods(0, 150, nil)
	notReady(flipped[120])

	tests := []struct {
		name        string
		pods        []*v1.Pod
		existing    []*discovery.EndpointSlice
		wantCreate  []int
		wantUpdate  map[string]int
		wantDeleted []string
	}{{
		name:       "250 pods make slices of 100, 100 and 50",
		pods:       makePods(0, 250, nil),
		wantCreate: []int{100, 100, 50},
	}, {
		name:       "10 gone from A and 5 new: the new ones go into A, B untouched",
		pods:       append(makePods(10, 150, nil), makePods(150, 155, nil)...),
		existing:   []*discovery.EndpointSlice{sliceA, sliceB},
		wantUpdate: map[string]int{"web-a": 95},
	}, {
		name:       "new pods fill the unchanged slice closest to full",
		pods:       makePods(0, 160, nil),
		existing:   []*discovery.EndpointSlice{sliceA, sliceB},
		wantUpdate: map[string]int{"web-b": 60},
	}, {
		name:       "no rebalancing: a half-empty slice stays half empty",
		pods:       append(makePods(0, 50, nil), makePods(100, 150, nil)...),
		existing:   []*discovery.EndpointSlice{sliceA, sliceB},
		wantUpdate: map[string]int{"web-a": 50},
	}, {
		name:       "one pod turning unready costs one slice update",
		pods:       flipped,
		existing:   []*discovery.EndpointSlice{sliceA, sliceB},
		wantUpdate: map[string]int{"web-b": 50},
	}, {
		name:        "an emptied slice is deleted",
		pods:        makePods(0, 100, nil),
		existing:    []*discovery.EndpointSlice{sliceA, sliceB},
		wantDeleted: []string{"web-b"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reconcile(web, tc.pods, testNodes, tc.existing, 100, time.Time{})
			if diff := cmp.Diff(tc.wantCreate, sizes(got.create)); diff != "" {
				t.Errorf("created sizes (-want +got):\n%s", diff)
			}
			updates := map[string]int{}
			for _, s := range got.update {
				updates[s.Name] = len(s.Endpoints)
			}
			if diff := cmp.Diff(tc.wantUpdate, updates, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("updated sizes (-want +got):\n%s", diff)
			}
			var deleted []string
			for _, s := range got.delete {
				deleted = append(deleted, s.Name)
			}
			if diff := cmp.Diff(tc.wantDeleted, deleted); diff != "" {
				t.Errorf("deleted (-want +got):\n%s", diff)
			}
			again := reconcile(web, tc.pods, testNodes, applyPlan(tc.existing, got), 100, time.Time{})
			if !again.empty() {
				t.Errorf("second reconcile is not a no-op")
			}
		})
	}
}

func TestReconcileDualStackAndTriggerTime(t *testing.T) {
	svc := makeService(ns, "web", func(s *v1.Service) {
		s.Spec.Selector = map[string]string{"app": "web"}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	})
	pod := makePod(ns, "pod-000", func(p *v1.Pod) {
		p.Status.PodIPs = []v1.PodIP{{IP: "10.244.0.0"}, {IP: "fd00::0:0"}}
	})
	trigger := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	got := reconcile(svc, []*v1.Pod{pod}, testNodes, nil, 100, trigger)
	if len(got.create) != 2 {
		t.Fatalf("want one slice per family, got %d", len(got.create))
	}
	for i, want := range []struct {
		at   discovery.AddressType
		addr string
	}{{discovery.AddressTypeIPv4, "10.244.0.0"}, {discovery.AddressTypeIPv6, "fd00::"}} {
		s := got.create[i]
		if s.AddressType != want.at || s.Endpoints[0].Addresses[0] != want.addr {
			t.Errorf("slice %d: %s %v, want %s %s", i, s.AddressType, s.Endpoints[0].Addresses, want.at, want.addr)
		}
		if s.Annotations[v1.EndpointsLastChangeTriggerTime] != "2025-01-02T03:04:05.000000006Z" {
			t.Errorf("slice %d: trigger annotation %q", i, s.Annotations[v1.EndpointsLastChangeTriggerTime])
		}
		ref := s.OwnerReferences[0]
		if ref.Kind != "Service" || ref.UID != svc.UID || !*ref.Controller || !*ref.BlockOwnerDeletion || s.GenerateName != "web-" {
			t.Errorf("slice %d: owner %+v generateName %q", i, ref, s.GenerateName)
		}
	}
}

func BenchmarkReconcile1000Pods(b *testing.B) {
	svc := makeService(ns, "web", func(s *v1.Service) { s.Spec.Selector = map[string]string{"app": "web"} })
	pods := makePods(0, 1000, nil)
	existing := applyPlan(nil, reconcile(svc, pods, testNodes, nil, 100, time.Time{}))
	notReady(pods[500])
	b.ReportAllocs()
	for b.Loop() {
		p := reconcile(svc, pods, testNodes, existing, 100, time.Time{})
		if len(p.update) != 1 {
			b.Fatalf("want 1 update, got %d", len(p.update))
		}
	}
}
