// Package scheduler assigns pending pods to nodes the way Kubernetes' default
// scheduler does, simplified: one pod at a time from a priority queue, a fixed
// chain of filters (node readiness and cordon, taints, node affinity, host
// ports, resource fit) and a fixed ranking (spread of a workload's pods across
// nodes and zones, then least requested resources, then node name).
//
// The decision is pure compute over a snapshot of nodes and bound pods
// (schedule); the Scheduler around it only keeps that snapshot fed from
// informers, remembers the pods it has just bound until the informers catch up,
// and applies the decision with one Bind call, or with one FailedScheduling
// event and a PodScheduled condition when no node fits. A pod that fits
// nowhere may preempt pods of lower priority as kube-scheduler's
// DefaultPreemption does (preemption.go): the victims get the
// DisruptionTarget condition and are deleted, and the pod is nominated to
// their node (status.nominatedNodeName), whose room lower-priority pods then
// leave to it.
package scheduler
