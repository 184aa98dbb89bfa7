package e2e

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/agent/node"
)

var nodesOnce sync.Once

// fakeNodes registers two nodes on the shared server, kept alive by the agent's own
// node package (registration, lease, status) running in this process: the pods of
// these tests are "on" them without any process running.
func fakeNodes(t *testing.T) {
	t.Helper()
	nodesOnce.Do(func() {
		c := shared.client(t)
		for i, zone := range []string{"a", "b"} {
			a := node.New(node.Config{Name: "e2e-node-" + zone, InternalIP: fmt.Sprintf("10.240.0.%d", 200+i), Zone: zone, CPU: 4, Memory: 8 << 30}, c)
			if _, err := a.Register(context.Background()); err != nil {
				t.Fatal(err)
			}
			go a.Run(context.Background())
		}
	})
}

// runningPod creates a pod on a fake node (no process runs it: its status is written
// here, as a node would) with the given container ports, an IP and a Ready condition.
// Its grace period is zero so that deleting it needs no node to confirm.
func runningPod(t *testing.T, c kubernetes.Interface, ns, name, ip string, labels map[string]string, ready bool, ports ...v1.ContainerPort) *v1.Pod {
	t.Helper()
	fakeNodes(t)
	ctx := context.Background()
	nodeName := "e2e-node-a"
	if strings.HasPrefix(ip, "10.244.2.") {
		nodeName = "e2e-node-b"
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1.PodSpec{NodeName: nodeName, TerminationGracePeriodSeconds: new(int64),
			Containers: []v1.Container{{Name: "c", Image: "busybox", Ports: ports}}}}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	setPodStatus(t, c, pod, ip, ready)
	p, _ := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	return p
}

func setPodStatus(t *testing.T, c kubernetes.Interface, pod *v1.Pod, ip string, ready bool) {
	t.Helper()
	status := v1.ConditionFalse
	if ready {
		status = v1.ConditionTrue
	}
	for attempt := 0; ; attempt++ {
		p, err := c.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.Phase = v1.PodRunning
		p.Status.PodIP = ip
		p.Status.PodIPs = []v1.PodIP{{IP: ip}}
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status}, {Type: v1.ContainersReady, Status: status}}
		_, err = c.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		if err == nil {
			return
		}
		if attempt > 5 {
			t.Fatal(err)
		}
	}
}

func slicesOf(t *testing.T, c kubernetes.Interface, ns, svc string) []discoveryv1.EndpointSlice {
	t.Helper()
	l, err := c.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// sliceSummary renders slices as sorted "port:ip,ip" strings.
func sliceSummary(slices []discoveryv1.EndpointSlice) string {
	var out []string
	for _, s := range slices {
		var ports []string
		for _, p := range s.Ports {
			if p.Port != nil {
				ports = append(ports, fmt.Sprint(*p.Port))
			}
		}
		var ips []string
		for _, e := range s.Endpoints {
			ips = append(ips, e.Addresses...)
		}
		sort.Strings(ips)
		out = append(out, strings.Join(ports, "+")+":"+strings.Join(ips, ","))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

func makeSvc(ns, name string, selector map[string]string, target intstr.IntOrString) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1.ServiceSpec{Selector: selector, Ports: []v1.ServicePort{{Name: "example", Port: 80, TargetPort: target}}}}
}

// TestEndpointSliceConformance follows the conformance test "should create Endpoints
// and EndpointSlices for Pods matching a Service".
func TestEndpointSliceConformance(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	c := s.client(t)
	ctx := context.Background()
	runningPod(t, c, ns, "pod1", "10.244.1.11", map[string]string{"app": "ex", "pod": "1"}, true, v1.ContainerPort{Name: "example-name", ContainerPort: 3000})
	runningPod(t, c, ns, "pod2", "10.244.2.12", map[string]string{"app": "ex", "pod": "2"}, true, v1.ContainerPort{Name: "example-name", ContainerPort: 3001})
	for _, svc := range []*v1.Service{
		makeSvc(ns, "int-port", map[string]string{"app": "ex", "pod": "1"}, intstr.FromInt32(80)),
		makeSvc(ns, "named-port", map[string]string{"app": "ex"}, intstr.FromString("example-name")),
		makeSvc(ns, "empty", map[string]string{"app": "nothing"}, intstr.FromInt32(80)),
	} {
		if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{
		"int-port":   "80:10.244.1.11",
		"named-port": "3000:10.244.1.11 3001:10.244.2.12",
		"empty":      ":", // upstream: a placeholder slice without ports
	}
	check := func(what string) {
		for svc, w := range want {
			eventually(t, 20*time.Second, what+": slices of "+svc, func() (bool, string) {
				got := sliceSummary(slicesOf(t, c, ns, svc))
				return got == w, got
			})
		}
	}
	check("created")
	for _, sl := range slicesOf(t, c, ns, "named-port") {
		if sl.Labels[discoveryv1.LabelManagedBy] != "endpointslice-controller.k8s.io" || len(sl.OwnerReferences) != 1 || sl.OwnerReferences[0].Kind != "Service" {
			t.Fatalf("slice labels/owner: %v %v", sl.Labels, sl.OwnerReferences)
		}
	}
	eventually(t, 20*time.Second, "endpoints of int-port", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "endpoints", "int-port", "-n", ns, "--no-headers")
		return regexp.MustCompile(`^int-port\s+10\.244\.1\.11:80\s+\S+\n$`).MatchString(out), out
	})
	// Deleted slices come back.
	if err := c.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	check("recreated")

	// kubectl shows the ENDPOINTS column as a real cluster does.
	out := s.must(t, "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=named-port")
	if !regexp.MustCompile(`(?m)^NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^named-port-\S+\s+IPv4\s+3000\s+10\.244\.1\.11\s+\S+$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^named-port-\S+\s+IPv4\s+3001\s+10\.244\.2\.12\s+\S+$`).MatchString(out) {
		t.Fatalf("kubectl get endpointslices:\n%s", out)
	}
}

// TestReadinessFlipMovesEndpoint: a pod turning unready stays in the slice with
// ready=false (the seed's "a pod leaving the slice"), and comes back when ready.
func TestReadinessFlipMovesEndpoint(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	c := s.client(t)
	s.must(t, "apply", "-n", ns, "-f", "testdata/000-api.yaml")
	var pods []*v1.Pod
	for i := 0; i < 3; i++ {
		pods = append(pods, runningPod(t, c, ns, fmt.Sprintf("api-%d", i), fmt.Sprintf("10.244.%d.20", i), map[string]string{"app": "api"}, true,
			v1.ContainerPort{ContainerPort: 8080}))
	}
	readyOf := func() string {
		var out []string
		for _, sl := range slicesOf(t, c, ns, "api-svc") {
			for _, e := range sl.Endpoints {
				out = append(out, fmt.Sprintf("%s=%v", e.Addresses[0], e.Conditions.Ready != nil && *e.Conditions.Ready))
			}
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	eventually(t, 20*time.Second, "three ready endpoints", func() (bool, string) {
		got := readyOf()
		return got == "10.244.0.20=true 10.244.1.20=true 10.244.2.20=true", got
	})
	setPodStatus(t, c, pods[1], "10.244.1.20", false)
	eventually(t, 20*time.Second, "api-1 not ready", func() (bool, string) {
		got := readyOf()
		return got == "10.244.0.20=true 10.244.1.20=false 10.244.2.20=true", got
	})
	out := s.must(t, "get", "endpoints", "api-svc", "-n", ns, "--no-headers")
	if strings.Contains(out, "10.244.1.20") {
		t.Fatalf("an unready pod must leave the Endpoints' addresses: %s", out)
	}
	setPodStatus(t, c, pods[1], "10.244.1.20", true)
	eventually(t, 20*time.Second, "api-1 ready again", func() (bool, string) {
		got := readyOf()
		return got == "10.244.0.20=true 10.244.1.20=true 10.244.2.20=true", got
	})
}

// TestServiceTypeTransitions walks the conformance suite's type changes with kubectl.
func TestServiceTypeTransitions(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	jp := func(f string) string { return s.must(t, "get", "svc", "tr", "-n", ns, "-o", "jsonpath="+f) }
	s.must(t, "create", "service", "externalname", "tr", "-n", ns, "--external-name=db.example.com")
	if ip := jp("{.spec.clusterIP}"); ip != "" {
		t.Fatalf("ExternalName has clusterIP %q", ip)
	}
	s.must(t, "patch", "svc", "tr", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"ClusterIP","externalName":null,"ports":[{"port":80}]}}`)
	ip := jp("{.spec.clusterIP}")
	if !regexp.MustCompile(`^10\.(9[6-9]|10[0-9]|11[01])\.\d+\.\d+$`).MatchString(ip) {
		t.Fatalf("ExternalName -> ClusterIP: clusterIP %q", ip)
	}
	s.must(t, "patch", "svc", "tr", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"NodePort"}}`)
	np := jp("{.spec.ports[0].nodePort}")
	if !regexp.MustCompile(`^3[0-2]\d{3}$`).MatchString(np) || jp("{.spec.clusterIP}") != ip {
		t.Fatalf("ClusterIP -> NodePort: nodePort %q clusterIP %q", np, jp("{.spec.clusterIP}"))
	}
	out := s.must(t, "get", "svc", "tr", "-n", ns)
	if !regexp.MustCompile(`(?m)^tr\s+NodePort\s+` + regexp.QuoteMeta(ip) + `\s+<none>\s+80:` + np + `/TCP\s+\S+$`).MatchString(out) {
		t.Fatalf("NodePort row:\n%s", out)
	}
	s.must(t, "patch", "svc", "tr", "-n", ns, "--type=merge", "-p", `{"spec":{"type":"ExternalName","externalName":"db.example.com"}}`)
	if jp("{.spec.clusterIP}") != "" || jp("{.spec.ports[0].nodePort}") != "" {
		t.Fatalf("NodePort -> ExternalName kept %q / %q", jp("{.spec.clusterIP}"), jp("{.spec.ports[0].nodePort}"))
	}
	// The freed port can be taken explicitly again.
	s.must(t, "create", "service", "nodeport", "again", "-n", ns, "--tcp=80:80", "--node-port="+np)
	_, errOut, err := s.kubectl(t, "", "create", "service", "nodeport", "clash", "-n", ns, "--tcp=80:80", "--node-port="+np)
	if err == nil || !strings.Contains(errOut, "spec.ports[0].nodePort: Invalid value: "+np+": provided port is already allocated") {
		t.Fatalf("duplicate nodePort: %v %s", err, errOut)
	}
}

// TestConcurrentServicesGetDistinctIPs creates 200 Services at once.
func TestConcurrentServicesGetDistinctIPs(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	cfg := s.restConfig(t)
	cfg.QPS, cfg.Burst = 500, 500
	c := kubernetes.NewForConfigOrDie(cfg)
	var mu sync.Mutex
	ips := map[string]string{}
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			svc, err := c.CoreV1().Services(ns).Create(context.Background(), makeSvc(ns, fmt.Sprintf("s%03d", i), map[string]string{"app": "x"}, intstr.FromInt32(80)), metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := ips[svc.Spec.ClusterIP]; dup {
				errs <- fmt.Errorf("%s and %s share %s", other, svc.Name, svc.Spec.ClusterIP)
			}
			ips[svc.Spec.ClusterIP] = svc.Name
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(ips) != 200 {
		t.Fatalf("%d distinct ClusterIPs, want 200", len(ips))
	}
}

// TestRestartKeepsAllocations: a restarted server keeps every ClusterIP and NodePort and
// hands out no duplicate afterwards.
func TestRestartKeepsAllocations(t *testing.T) {
	srv, err := startServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.stop(); _ = os.RemoveAll(srv.dataDir) })
	c := srv.client(t)
	ctx := context.Background()
	before := map[string]string{}
	for i := 0; i < 20; i++ {
		svc := makeSvc("default", fmt.Sprintf("keep%02d", i), map[string]string{"app": "x"}, intstr.FromInt32(80))
		svc.Spec.Type = v1.ServiceTypeNodePort
		got, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[got.Name] = fmt.Sprintf("%s/%d", got.Spec.ClusterIP, got.Spec.Ports[0].NodePort)
	}
	srv.stop()
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	c = srv.client(t)
	used := map[string]bool{}
	for name, want := range before {
		got, err := c.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if have := fmt.Sprintf("%s/%d", got.Spec.ClusterIP, got.Spec.Ports[0].NodePort); have != want {
			t.Fatalf("%s: %s after restart, %s before", name, have, want)
		}
		ip, port, _ := strings.Cut(want, "/")
		used[ip], used[port] = true, true
	}
	for i := 0; i < 20; i++ {
		svc := makeSvc("default", fmt.Sprintf("new%02d", i), map[string]string{"app": "x"}, intstr.FromInt32(80))
		svc.Spec.Type = v1.ServiceTypeNodePort
		got, err := c.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if used[got.Spec.ClusterIP] || used[fmt.Sprint(got.Spec.Ports[0].NodePort)] {
			t.Fatalf("%s got an address in use: %s/%d", got.Name, got.Spec.ClusterIP, got.Spec.Ports[0].NodePort)
		}
	}
}
