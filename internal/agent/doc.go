// Package agent is the node agent: it runs the pods bound to its node as OCI
// containers (runtime) in their own network namespaces and reports their status. Its
// parts live in subpackages; the pure ones, usable and tested without root, are
// podfiles (the /etc files kubelet writes), probe (liveness, readiness and startup
// probes), status (a Pod's status from the agent's view) and backoff
// (CrashLoopBackOff); images gives containers their images from the host's store.
package agent
