// Package admission calls the cluster's admission webhooks
// (admissionregistration.k8s.io/v1 Mutating- and ValidatingWebhookConfigurations) from
// tranche's admission steps. The matching (rules, namespaceSelector, objectSelector,
// matchConditions), the AdmissionReview v1 exchange, failurePolicy, timeouts, JSON
// patches and the error wording are k8s.io/apiserver's own webhook plugins
// (pkg/admission/plugin/webhook/mutating and validating) fed from informers; this
// package adapts tranche's AdmissionRequest to their admission.Attributes and gives them
// the way to reach a webhook: a Service's ready endpoints dialled from the cluster
// network, never from the host's.
package admission
