package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	crv1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
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

// runcOwnRun starts pods pause containers with runc as the node's shim does (`runc run
// --detach` with pipes as stdio, from a bundle written beforehand by ocispec.Spec for
// the benchmark's pause pod, joining an existing network namespace by path, in a cgroup
// below a node's; this process a child subreaper that reaps them), one every
// pacedInterval, each timed from the start of runc until it returns with the
// container's process running the pause program. What the agent does
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
	procs := make([]*os.Process, pods)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		for _, p := range procs {
			if p != nil {
				_ = p.Kill()
				_, _ = p.Wait()
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
			out, err := os.Create(filepath.Join(bundles[i], "out"))
			if err != nil {
				errs <- err
				return
			}
			defer out.Close()
			start := time.Now()
			pid, err := rt.RunDetached(context.Background(), ids[i], bundles[i], nil, out, out, "")
			if err != nil {
				errs <- err
				return
			}
			lat[i] = time.Since(start)
			if procs[i], err = os.FindProcess(pid); err != nil {
				errs <- err
			}
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
	// runc and the containers (this process's children once runc has exited) count in
	// RUSAGE_CHILDREN once reaped: end each container and reap it.
	for i, p := range procs {
		_ = p.Kill()
		_, _ = p.Wait()
		procs[i] = nil
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &after); err != nil {
		b.Fatal(err)
	}
	used := rusageCPU(after) - rusageCPU(before)
	slices.Sort(lat)
	return runcRound{lat: lat, cpu: used / pods}
}

func rusageCPU(r syscall.Rusage) time.Duration {
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
