package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tranche/tranche/internal/agent/ocispec"
	"github.com/tranche/tranche/internal/agent/runc"
	"github.com/tranche/tranche/internal/imagebuild"
	"github.com/tranche/tranche/internal/netns"
)

// runcRound is the runtime's own part of a pod start, measured without tranche:
// latencies of pods containers started straight with runc, one every pacedInterval,
// sorted, and the CPU time runc and the containers used per container.
type runcRound struct {
	lat []time.Duration
	cpu time.Duration
}

// runcOwnRun starts pods pause containers with runc as the agent does (`runc run
// --keep`, from a bundle written beforehand by ocispec.Spec for the benchmark's pause
// pod, joining an existing network namespace by path, in a cgroup below a node's), one
// every pacedInterval, each timed from the start of runc to its pid file, which runc
// writes once the container's process runs the pause program. What the agent does
// besides (the pod's network namespace, veth and address, the overlay root file
// system, the bundle, status updates) and what the control plane does is not in it:
// that is tranche's overhead over the runtime.
func runcOwnRun(b *testing.B) runcRound {
	b.Helper()
	bin, err := runc.Find()
	if err != nil {
		b.Fatal(err)
	}
	pause := imagebuild.EmbeddedPause()
	if pause == nil {
		b.Fatal("this benchmark was built without the pause program: run it with make bench-cluster")
	}
	dir := b.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	for _, d := range []string{"proc", "dev", "sys", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(rootfs, "pause"), pause, 0o755); err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("bcr%d", os.Getpid())
	if err := netns.Create(name); err != nil {
		b.Fatal(err)
	}
	node := runc.NodeCgroup(name)
	rt := &runc.Runtime{Binary: bin, Root: filepath.Join(dir, "runc")}
	ids := make([]string, pods)
	bundles := make([]string, pods)
	cmds := make([]*exec.Cmd, pods)
	b.Cleanup(func() {
		for i, cmd := range cmds {
			if cmd != nil {
				killContainer(bundles[i])
				_ = cmd.Wait()
			}
		}
		for _, id := range ids {
			_ = rt.Delete(context.Background(), id)
		}
		if err := runc.RemoveNode(node); err != nil {
			b.Errorf("removing cgroup %s: %v", node, err)
		}
		if err := netns.Delete(name); err != nil {
			b.Errorf("removing network namespace %s: %v", name, err)
		}
	})
	hostCaps, err := ocispec.HostCapabilities()
	if err != nil {
		b.Fatal(err)
	}
	img := crv1.Config{Entrypoint: []string{"/pause"}, User: "65535:65535"}
	for i := range pods {
		pod := pausePod(fmt.Sprintf("p-%03d", i))
		pod.Namespace, pod.UID = "bench-runc", types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))
		ids[i] = fmt.Sprintf("%s-%03d", name, i)
		bundles[i] = filepath.Join(dir, "bundles", strconv.Itoa(i))
		spec, err := ocispec.Spec(ocispec.Input{
			Pod: pod, Container: &pod.Spec.Containers[0], Image: img, Rootfs: rootfs,
			NetNS: netns.Path(name), Hostname: pod.Name,
			CgroupsPath:      node + "/pod" + string(pod.UID) + "/" + ids[i],
			HostCapabilities: hostCaps, Cgroup2: runc.Cgroup2(),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := runc.WriteBundle(bundles[i], spec); err != nil {
			b.Fatal(err)
		}
	}

	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &before); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, pods)
	errs := make(chan error, pods)
	var wg sync.WaitGroup
	tick := time.NewTicker(pacedInterval)
	for i := range pods {
		wg.Go(func() {
			start := time.Now()
			cmd, err := rt.Start(context.Background(), ids[i], bundles[i], nil, io.Discard, io.Discard, nil)
			if err != nil {
				errs <- err
				return
			}
			cmds[i] = cmd
			for {
				if _, err := os.Stat(runc.PIDPath(bundles[i])); err == nil {
					break
				}
				if time.Since(start) > startupTimeout {
					errs <- fmt.Errorf("runc run of %s: no pid file after %s", ids[i], startupTimeout)
					return
				}
				time.Sleep(time.Millisecond)
			}
			lat[i] = time.Since(start)
		})
		<-tick.C
	}
	tick.Stop()
	wg.Wait()
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}
	if err := errors.Join(failed...); err != nil {
		b.Fatal(err)
	}
	// The runc processes and the containers they reaped count in RUSAGE_CHILDREN once
	// they have exited: end each container (not with `runc kill`, another runc), wait.
	for i, cmd := range cmds {
		killContainer(bundles[i])
		_ = cmd.Wait()
		cmds[i] = nil
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after); err != nil {
		b.Fatal(err)
	}
	used := rusageCPU(after) - rusageCPU(before)
	slices.Sort(lat)
	return runcRound{lat: lat, cpu: used / pods}
}

// killContainer sends SIGKILL to the container whose bundle holds a pid file.
func killContainer(bundle string) {
	data, err := os.ReadFile(runc.PIDPath(bundle))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(string(data)); err == nil && pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func rusageCPU(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
