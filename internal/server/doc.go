// Package server assembles `tranche server`: storage (embedded or external etcd), PKI,
// the API handler, bootstrap objects and the control-plane controllers.
//
// # Architecture
//
// One `tranche server` process holds the control plane:
//
//   - etcd, embedded (loopback or a unix socket only) unless --etcd-servers names a
//     cluster; the API server reads and writes it through internal/storage.
//   - the API server (internal/apiserver, resources in internal/registry), on the
//     loopback listener and on the cluster network's listener. Its /metrics serves the
//     request and storage metrics and, through client-go's workqueue metrics provider
//     set in Run, the work queues of every controller (workqueue_*{name="<queue>"}).
//   - beside the API, what extension API servers need (extensionauth.go): the
//     front-proxy CA and client certificate the aggregator presents to them, the
//     request-header authentication of that CA, and the kube-system ConfigMap
//     extension-apiserver-authentication that tells them whom to trust.
//   - the controller manager (internal/controller/manager), started by
//     startControllers in controllers.go once the API server is ready. controllers.go
//     is the list of descriptors: a name and a constructor per controller, given the
//     shared clientset, informer factory, logger and metrics registry. The manager
//     constructs every enabled controller, starts the informers, runs each controller
//     once its caches are in, and on stop waits for every worker to return. It is the
//     unit leader election switches on and off when several servers share a cluster.
//   - the controllers themselves, one package each under internal/controller: workload
//     controllers (deployment, replicaset and replication controller, daemonset,
//     statefulset, job, cronjob, horizontalpodautoscaling), service plumbing
//     (endpointslice, endpoints, endpointslicemirroring, servicelb), nodes (nodeipam,
//     nodelifecycle, podgc), namespaces and garbage (namespace, garbagecollector),
//     per-namespace objects (serviceaccount, root-ca-cert-publisher), storage (localpv),
//     RBAC (clusterrole-aggregation), the Service allocator's repair loop
//     (internal/allocator's RepairLoop: ClusterIPs, NodePorts and IPAddress objects, as
//     kube-apiserver's repair controllers), and the scheduler (internal/scheduler), which the
//     manager runs like a controller. Every queue controller syncs through one loop,
//     internal/controller/worker: a rate-limited queue, a retry budget (15 in most
//     controllers, as upstream), workqueue metrics under the controller's queue name, and
//     a Run that returns only after its workers did.
//
// Outside this process: `tranche agent` runs on every node (for `tranche up`, one child
// process per node inside the node's network namespace) with the kubelet's work (pod
// sandboxes, containers, probes, status) and the proxy (nftables); cluster DNS and the
// ingress run as system pods in kube-system. They all meet the control plane only
// through the API.
package server
