package workloads

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// nodes is the size of the cluster the benchmark starts.
	nodes = 3
	// replicas is the Deployment's scale-up, 100 pods a node (a node takes 110).
	replicas = 300
	// creators is how many clients create the bare pods of the peer measurement.
	creators = 16
	// minPodWrites is the least a pod costs: its create, its binding to a node, and one
	// status write that reports it Running and Ready.
	minPodWrites = 3
	// quiet is how long no write must be seen before the counts are read: the
	// controllers' last status writes follow the last pod turning Ready.
	quiet = 2 * time.Second
)

// BenchmarkWorkloads starts a 3-node `tranche up` and measures a Deployment's scale-up
// and a DaemonSet's convergence on a new node, each beside a peer measured in the same
// run; it prints one table at the end. Run it as root with -benchtime 1x
// (make bench-workloads).
func BenchmarkWorkloads(b *testing.B) {
	c := startCluster(b, nodes)
	rp := newReport()
	b.Run("deployment-0-to-300", func(b *testing.B) { benchScaleUp(b, c, rp) })
	b.Run("daemonset-node-add", func(b *testing.B) { benchDaemonSetNodeAdd(b, c, rp) })
	rp.Print(os.Stdout)
}

// podTemplate is a pod that is Ready as soon as its process runs and goes within a
// second when deleted.
func podTemplate(labels map[string]string) v1.PodTemplateSpec {
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: v1.PodSpec{
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers:                    []v1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}},
		},
	}
}

// phase is one measured run: how long until n pods were Ready, and the writes seen.
type phase struct {
	took   time.Duration
	writes map[string]int
}

func (p phase) perPod(kinds ...string) float64 {
	n := 0
	for _, k := range kinds {
		n += p.writes[k]
	}
	return float64(n) / replicas
}

// benchScaleUp: the peer first (300 pods created directly by 16 clients, then deleted),
// then a Deployment of 0 replicas scaled to 300 as `kubectl scale` does. The timer
// covers the Deployment only.
func benchScaleUp(b *testing.B, c *cluster, rp *report) {
	var bare, deploy phase
	for i := range b.N {
		b.StopTimer()
		bare = barePods(b, c, fmt.Sprintf("bare-%d", i))
		b.StartTimer()
		deploy = scaleDeployment(b, c, fmt.Sprintf("deploy-%d", i))
	}
	b.ReportMetric(deploy.took.Seconds(), "s-to-300-ready")
	b.ReportMetric(deploy.perPod("pods"), "pod-writes/pod")
	b.ReportMetric(deploy.perPod("pods", "events", "replicasets", "deployments"), "writes/pod")
	rp.Set(row{Metric: "Deployment 0 -> 300 replicas on 3 nodes, until all Ready", Ours: secs(deploy.took),
		Reference: fmt.Sprintf("300 pods created by %d clients: %s", creators, secs(bare.took)), Ratio: ratio(deploy.took.Seconds(), bare.took.Seconds())})
	rp.Set(row{Metric: "pod writes per pod (Deployment)", Ours: fmt.Sprintf("%.2f", deploy.perPod("pods")),
		Reference: fmt.Sprintf("minimum %d (create, bind, Ready)", minPodWrites), Ratio: deploy.perPod("pods") / minPodWrites})
	rp.Set(row{Metric: "pod writes per pod (bare pods)", Ours: fmt.Sprintf("%.2f", bare.perPod("pods")),
		Reference: fmt.Sprintf("minimum %d (create, bind, Ready)", minPodWrites), Ratio: bare.perPod("pods") / minPodWrites})
	all := deploy.perPod("pods", "events", "replicasets", "deployments")
	bareAll := bare.perPod("pods", "events")
	rp.Set(row{Metric: "all API writes per pod (Deployment)", Ours: fmt.Sprintf("%.2f", all),
		Reference: fmt.Sprintf("bare pods: %.2f", bareAll), Ratio: ratio(all, bareAll)})
	rp.Note("Deployment writes: %s; bare pods: %s (watch events: writes that changed an object)", writeSummary(deploy.writes), writeSummary(bare.writes))
}

// barePods creates replicas pods with creators clients, waits until all are Ready,
// counts the writes, and deletes them again (waiting until they are gone, so that the
// next measurement has the nodes to itself).
func barePods(b *testing.B, c *cluster, name string) phase {
	b.Helper()
	ns := c.namespace(b, name)
	obs := c.observe(b, ns)
	ctx := context.Background()
	tmpl := podTemplate(map[string]string{"app": "bare"})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, creators)
	for w := range creators {
		wg.Go(func() {
			for i := w; i < replicas; i += creators {
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bare-%03d", i), Labels: tmpl.Labels}, Spec: tmpl.Spec}
				if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("creating bare pods: %v", err)
	default:
	}
	p := untilReady(b, obs, start)
	obs.stop()
	if err := c.client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatal(err)
	}
	waitGone(b, c, ns)
	return p
}

// scaleDeployment creates a Deployment of 0 replicas, waits until its ReplicaSet
// exists, scales it to replicas through the scale subresource, and measures until all
// are Ready; then scales it back to 0 and waits until the pods are gone.
func scaleDeployment(b *testing.B, c *cluster, name string) phase {
	b.Helper()
	ns := c.namespace(b, name)
	ctx := context.Background()
	labels := map[string]string{"app": "scale"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "scale"},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels),
		},
	}
	if _, err := c.client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitFor(b, 30*time.Second, "the Deployment's ReplicaSet", func() bool {
		got, err := c.client.AppsV1().Deployments(ns).Get(ctx, "scale", metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && got.Annotations["deployment.kubernetes.io/revision"] == "1"
	})
	obs := c.observe(b, ns)
	start := time.Now()
	scale(b, c, ns, replicas)
	p := untilReady(b, obs, start)
	obs.stop()
	b.StopTimer()
	scale(b, c, ns, 0)
	waitGone(b, c, ns)
	b.StartTimer()
	return p
}

// scale sets the Deployment's replicas through its scale subresource, as `kubectl
// scale` does.
func scale(b *testing.B, c *cluster, ns string, n int32) {
	b.Helper()
	ctx := context.Background()
	sc, err := c.client.AppsV1().Deployments(ns).GetScale(ctx, "scale", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	sc.Spec.Replicas = n
	if _, err := c.client.AppsV1().Deployments(ns).UpdateScale(ctx, "scale", sc, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
}

// untilReady waits until replicas pods of obs's namespace were seen Ready and the
// writes settled.
func untilReady(b *testing.B, obs *observer, start time.Time) phase {
	b.Helper()
	waitFor(b, 5*time.Minute, fmt.Sprintf("%d pods Ready", replicas), func() bool {
		obs.check(b)
		n, _ := obs.ready()
		return n >= replicas
	})
	_, last := obs.ready()
	return phase{took: last.Sub(start), writes: obs.settle(b, quiet, time.Minute)}
}

// waitGone waits until ns has no pods left.
func waitGone(b *testing.B, c *cluster, ns string) {
	b.Helper()
	waitFor(b, 3*time.Minute, "pods of "+ns+" gone", func() bool {
		l, err := c.client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	})
}

// benchDaemonSetNodeAdd: a DaemonSet Ready on the 3 nodes; `tranche node add` brings a
// node; measured from the node turning Ready to the DaemonSet's pod there turning Ready,
// beside a bare pod pinned to the same node the way daemon pods are (required node
// affinity on metadata.name), from its create to Ready.
func benchDaemonSetNodeAdd(b *testing.B, c *cluster, rp *report) {
	ctx := context.Background()
	ns := c.namespace(b, "daemons")
	labels := map[string]string{"app": "daemon"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "daemon"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podTemplate(labels)},
	}
	if _, err := c.client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitFor(b, time.Minute, "the DaemonSet Ready on every node", func() bool {
		got, err := c.client.AppsV1().DaemonSets(ns).Get(ctx, "daemon", metav1.GetOptions{})
		return err == nil && got.Status.NumberReady == nodes && got.Status.DesiredNumberScheduled == nodes
	})
	var converge, peer, addToReady, react, peerBind time.Duration
	var steps string
	b.ResetTimer()
	for i := range b.N {
		node := fmt.Sprintf("tranche-%d", nodes+1+i)
		obs := c.observe(b, ns)
		start := time.Now()
		if out, err := exec.Command(c.bin, "node", "add", node, "--data-dir", c.dataDir).CombinedOutput(); err != nil {
			b.Fatalf("tranche node add %s: %v\n%s", node, err, out)
		}
		var daemon podTimes
		var nodeReady time.Time
		waitFor(b, time.Minute, "the DaemonSet's pod Ready on "+node, func() bool {
			obs.check(b)
			var ok1, ok2 bool
			daemon, ok1 = obs.readyOn(node)
			nodeReady, ok2 = obs.nodeReadyAt(node)
			return ok1 && ok2
		})
		converge, addToReady = daemon.ready.Sub(nodeReady), nodeReady.Sub(start)
		steps = fmt.Sprintf("created %s, bound %s, Ready %s", since(nodeReady, daemon.added), since(nodeReady, daemon.bound), since(nodeReady, daemon.ready))
		b.StopTimer()
		pinned := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pinned-" + node, Labels: map[string]string{"app": "pinned"}}, Spec: podTemplate(nil).Spec}
		pinned.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node}}}}}}}}
		created := time.Now()
		if _, err := c.client.CoreV1().Pods(ns).Create(ctx, pinned, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		waitFor(b, time.Minute, "the pinned pod Ready", func() bool { return !obs.times(pinned.Name).ready.IsZero() })
		pt := obs.times(pinned.Name)
		peer, peerBind = pt.ready.Sub(created), pt.bound.Sub(created)
		react = daemon.added.Sub(nodeReady)
		obs.stop()
		b.StartTimer()
	}
	b.ReportMetric(converge.Seconds(), "s-node-ready-to-daemon-ready")
	rp.Set(row{Metric: "DaemonSet: new node Ready -> its daemon pod Ready", Ours: secs(converge),
		Reference: fmt.Sprintf("bare pod pinned to the node, create -> Ready: %s", secs(peer)), Ratio: ratio(converge.Seconds(), peer.Seconds())})
	rp.Set(row{Metric: "DaemonSet: new node Ready -> its daemon pod created", Ours: secs(react),
		Reference: fmt.Sprintf("the pinned pod, create -> bound (scheduler): %s", secs(peerBind)), Ratio: ratio(react.Seconds(), peerBind.Seconds())})
	rp.Note("tranche node add -> node Ready: %s; the daemon pod, from the node Ready: %s (the first pod of a new node; the pinned pod is its second)", secs(addToReady), steps)
}

// since is t - from as a signed duration in milliseconds.
func since(from, t time.Time) string {
	return fmt.Sprintf("%+d ms", t.Sub(from).Milliseconds())
}
