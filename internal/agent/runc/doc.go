// Package runc is everything the node agent says to the OCI runtime (runc, Debian's
// package) and to the kernel's cgroups: bundles, running, exec'ing into, signalling,
// inspecting and deleting containers, the pod-level cgroup with its resources and the
// statistics kubelet reports (OOM kills, CPU throttling), and the pod-level IPC and UTS
// namespaces that a pod's containers share.
//
// # Who supervises a container
//
// RunDetached starts a container with `runc run --detach`: runc creates the container,
// starts its process, writes its pid and exits, so that no runc process stays with a
// running container. The container's process, orphaned when runc exits, becomes the
// child of the nearest child subreaper among runc's ancestors, and that must be the
// caller: a process that called prctl(PR_SET_CHILD_SUBREAPER) before RunDetached (the
// node's shim, internal/agent/shim, does so once when it starts serving). The caller
// then owns what runc no longer does:
//
//   - Reaping. The caller waits for the pid RunDetached returned (os.FindProcess(pid),
//     then Wait) and computes the exit code from the wait status, 128+N for a process
//     killed by signal N, as a shell reports it. Nobody else can: runc only knows that
//     the container has stopped, and a caller that is not a subreaper lets the process
//     go to init, which reaps it and loses its status. A process never waited for stays
//     a zombie.
//   - Stdio. The files given to RunDetached are passed through to the container's
//     process as they are, with no copy by runc: the caller reads the other ends of its
//     pipes. A tty container (spec.Process.Terminal) gets a terminal that runc makes in
//     the container's devpts, sized from spec.Process.ConsoleSize; runc sends its
//     master over the console socket, and the caller copies to and from it and resizes
//     it.
//   - Signals. Kill goes through `runc kill` (or the caller signals the pid itself):
//     there is no runc process to forward them.
//
// The stopped container, and with it its cgroup, stays in place after its process has
// exited, so that the caller can read Stats (the OOM kill counter lives in the
// container's cgroup) before Delete removes both. Delete uses --force: a container
// still running is killed first.
//
// A caller that dies leaves its containers running: their processes go to the next
// subreaper or to init, and they stay visible under Runtime.Root to `runc list` and to
// List, where the next agent's Cleanup finds and Deletes those it does not adopt.
//
// Exec runs `runc exec` in the foreground instead, as a child of the caller that lives
// as long as the exec'd process and exits with its exit code; console.go describes its
// terminals.
package runc
