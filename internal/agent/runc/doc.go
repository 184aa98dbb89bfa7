// Package runc is everything the node agent says to the OCI runtime (runc, Debian's
// package) and to the kernel's cgroups: bundles, running, exec'ing into, signalling,
// inspecting and deleting containers, the pod-level cgroup with its resources and the
// statistics kubelet reports (OOM kills, CPU throttling), and the pod-level IPC and UTS
// namespaces that a pod's containers share.
//
// # Who supervises a container
//
// Start runs `runc run --keep` in the foreground as a child of the agent. runc stays the
// container's parent for the container's whole life: it copies the agent's stdio to
// and from the container's process (through pipes of its own, or through the
// container's terminal for tty containers: see console.go), forwards every signal it
// receives to it, and exits with its exit code (128+N when it was killed by signal N). --keep leaves the stopped container, and with it its cgroup,
// in place when it exits, so that the agent can read Stats (the OOM kill counter lives in
// the container's cgroup) before Delete removes both.
//
// runc is started in its own process group and without a parent-death signal. A
// parent-death SIGKILL would kill runc but not the container (runc could forward
// nothing), leaving exactly the orphan we want to avoid; without it, when the agent dies
// runc and the container keep running, both visible under Runtime.Root to `runc list`
// and to List, so that an agent that starts again (or `tranche down`) finds them and
// either adopts or Deletes them. Killing runc itself with SIGKILL does leave its
// container running until Delete, which uses --force; cancelling Start's context goes
// through `runc kill` instead, so that the container dies and runc reports it.
//
// What is not there yet (the next issue, containers that outlive the agent for good):
// the container's stdio ends in the agent's pipes, so output written while no agent
// reads it is lost (EPIPE), a container whose runc was SIGKILLed has lost its stdio
// altogether, and the exit code of a container whose runc was reparented is not seen by
// the new agent. The plan is a small per-container shim (the tranche binary itself)
// between the agent and `runc run`, owning the log file and the exit status, with the
// agent as a child subreaper; Start's contract (runc's exit code is the container's)
// stays the same for it.
package runc
