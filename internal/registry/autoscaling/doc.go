// Package autoscaling serves HorizontalPodAutoscalers: autoscaling/v2, which is how they
// are stored, and autoscaling/v1 as a view of the same objects, converted the way
// Kubernetes converts them (what v1 cannot say travels in the autoscaling.alpha.kubernetes.io
// annotations). Defaulting, validation (field paths and wording) and the table kubectl
// prints follow Kubernetes' autoscaling defaulters, validators and printers at the API
// version tranche reports, so HPAScaleToZero, HPAGeneration and configurable tolerances are
// on, as they are by default there.
package autoscaling
