// Package quota runs kube-apiserver's ResourceQuota and LimitRanger admission plugins
// (k8s.io/apiserver's resourcequota and k8s.io/kubernetes' limitranger, unchanged) as
// tranche admission steps: the requests tranche's API server hands its Mutators and
// Validators become admission.Attributes, in the internal types where the plugin wants
// them, so usage, defaults and refusal messages are upstream's own.
//
// Like upstream, quota usage is charged by updating the quota's status through the API
// (a compare-and-swap on its resourceVersion, retried on conflict) before the object is
// stored, so racing creates cannot both take the last unit; a write that then fails
// leaves usage charged until the resource quota controller recomputes it.
package quota
