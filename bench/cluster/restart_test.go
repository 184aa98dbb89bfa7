package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tranche/tranche/bench/benchcluster"
)

// restartPods is how many pause pods run on the node whose agent is killed.
const restartPods = 50

// Goals of issue 15.
const (
	goalPerPodOverhead = 2e6 // bytes tranche adds per running pod beyond its processes
	goalAdopt          = 2 * time.Second
)

// benchAgentRestart runs 50 pause pods on a 1-node cluster, then reads the memory that
// running them costs beyond the pause processes themselves (the node's shim and any
// runc process, as PSS, divided by the pods),
// kills the agent with SIGKILL and times how long `tranche up` and the new agent take
// to adopt every container again (from the kill to the last "adopted" line of the new
// agent's log), checking that none was restarted.
func benchAgentRestart(b *testing.B, bin string, rp *report) {
	c := benchcluster.Start(b, bin, "br", 1)
	client := c.Client(b)
	ns := "bench-restart"
	ctx, cancel := context.WithTimeout(context.Background(), startupTimeout)
	defer cancel()
	lat := startPodsN(b, client, ns, restartPods, 20*time.Millisecond).ready
	if len(lat) != restartPods {
		b.Fatalf("%d of %d pods Ready", len(lat), restartPods)
	}
	time.Sleep(2 * time.Second) // let start-up garbage settle
	var shimMem, runcMem memory
	var runcs int
	for _, p := range descendants(c.PID) {
		args := cmdline(p)
		m, err := procMemory(p)
		if err != nil {
			continue
		}
		switch {
		case len(args) > 1 && args[1] == "shim":
			shimMem.rss += m.rss
			shimMem.pss += m.pss
		case strings.HasSuffix(args[0], "runc"):
			runcMem.rss += m.rss
			runcMem.pss += m.pss
			runcs++
		}
	}
	perPod := (shimMem.pss + runcMem.pss) / restartPods
	b.ReportMetric(float64(perPod), "overhead-bytes/pod")
	rp.Set(row{Metric: fmt.Sprintf("memory per running pod beyond its processes (PSS, %d pause pods)", restartPods), Ours: mb(perPod),
		Reference: "goal " + mb(goalPerPodOverhead), Ratio: ratio(float64(perPod), goalPerPodOverhead), Goal: "<= 1"})
	rp.Note("per-pod overhead: the node's shim %s PSS (%s RSS) and %d runc processes %s PSS (%s RSS) for %d pods",
		mb(shimMem.pss), mb(shimMem.rss), runcs, mb(runcMem.pss), mb(runcMem.rss), restartPods)

	ids := map[string]string{}
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods.Items {
		ids[p.Name] = p.Status.ContainerStatuses[0].ContainerID
	}
	pidFile := filepath.Join(c.Dir, "nodes", "tranche-1", "agent.pid")
	logFile := filepath.Join(c.Dir, "nodes", "tranche-1", "agent.log")
	old := readPIDFile(b, pidFile)
	killed := time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	var last time.Time
	for {
		if time.Since(killed) > time.Minute {
			b.Fatalf("the new agent did not adopt %d containers within a minute", restartPods)
		}
		n, t := adoptedSince(b, logFile, ns, killed)
		if n >= restartPods {
			last = t
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := last.Sub(killed)
	pods, err = client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for _, p := range pods.Items {
		st := p.Status.ContainerStatuses[0]
		if st.ContainerID != ids[p.Name] || st.RestartCount != 0 || st.State.Running == nil {
			b.Errorf("pod %s after the agent restart: %s, %d restarts, running %v; want %s, 0, running", p.Name, st.ContainerID, st.RestartCount, st.State.Running != nil, ids[p.Name])
		}
	}
	b.ReportMetric(took.Seconds(), "adopt-s")
	rp.Set(row{Metric: fmt.Sprintf("agent kill -9 to all %d containers adopted (none restarted)", restartPods), Ours: ms(took),
		Reference: "goal " + ms(goalAdopt), Ratio: ratio(float64(took), float64(goalAdopt)), Goal: "<= 1"})
	rp.Note("agent restart: tranche up starts a killed agent again after 100 ms; the rest is the new agent's start and adoption")
}

func readPIDFile(b *testing.B, path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(data))[0])
	if err != nil || pid <= 1 {
		b.Fatalf("%s: %q", path, data)
	}
	return pid
}

var adoptedLine = regexp.MustCompile(`^time=(\S+) .*msg="adopted a running container" .*pod=(\S+)/`)

// adoptedSince counts the agent log's adoptions of containers of namespace ns logged
// after since, and returns the time of the last.
func adoptedSince(b *testing.B, path, ns string, since time.Time) (int, time.Time) {
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	n, last := 0, time.Time{}
	for _, line := range strings.Split(string(data), "\n") {
		m := adoptedLine.FindStringSubmatch(line)
		if m == nil || m[2] != ns {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || t.Before(since) {
			continue
		}
		n++
		if t.After(last) {
			last = t
		}
	}
	return n, last
}
