package job

import (
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// completionIndexEnv is the variable Indexed jobs' containers read their
// index from.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// podIndexLabel carries the completion index as a label too, as upstream
// does since 1.28, so that pods of one index can be selected.
const podIndexLabel = "batch.kubernetes.io/job-completion-index"

var controllerKind = batchv1.SchemeGroupVersion.WithKind("Job")

// newPod builds a pod of the job from its template: generateName
// "<job>-" ("<job>-<index>-" when Indexed), the template's labels, the
// tracking finalizer and the controller reference; Indexed pods get their
// index as annotation, label, JOB_COMPLETION_INDEX and hostname
// "<job>-<index>".
//
// With backoffLimitPerIndex, the pod records its index's earlier failures
// in the job-index-failure-count annotation.
func newPod(job *batchv1.Job, index, indexFailures int) *v1.Pod {
	tmpl := job.Spec.Template.DeepCopy()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          tmpl.Labels,
			Annotations:     tmpl.Annotations,
			Finalizers:      append(tmpl.Finalizers, batchv1.JobTrackingFinalizer),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, controllerKind)},
		},
		Spec: tmpl.Spec,
	}
	if index == noIndex {
		return pod
	}
	ix := strconv.Itoa(index)
	pod.GenerateName = job.Name + "-" + ix + "-"
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = ix
	if job.Spec.BackoffLimitPerIndex != nil {
		pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(indexFailures)
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[podIndexLabel] = ix
	if pod.Spec.Hostname == "" {
		pod.Spec.Hostname = job.Name + "-" + ix
	}
	env := v1.EnvVar{Name: completionIndexEnv, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{
		FieldPath: fmt.Sprintf("metadata.annotations['%s']", batchv1.JobCompletionIndexAnnotation)}}}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if !hasEnv(list[i].Env, completionIndexEnv) {
				list[i].Env = append(list[i].Env, env)
			}
		}
	}
	return pod
}

func hasEnv(env []v1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func hasFinalizer(pod *v1.Pod) bool {
	for _, f := range pod.Finalizers {
		if f == batchv1.JobTrackingFinalizer {
			return true
		}
	}
	return false
}

func isTerminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// isActive is a pod that runs or will: not terminal, not being deleted.
func isActive(pod *v1.Pod) bool {
	return !isTerminal(pod) && pod.DeletionTimestamp == nil
}

// isFailed says whether the pod counts as a failure: Failed phase, or —
// unless only failed pods are replaced — deleted before it succeeded, so
// that orphans that never reach a phase are counted.
func isFailed(pod *v1.Pod, job *batchv1.Job) bool {
	if pod.Status.Phase == v1.PodFailed {
		return true
	}
	if onlyReplaceFailed(job) {
		return false
	}
	return pod.DeletionTimestamp != nil && pod.Status.Phase != v1.PodSucceeded
}

func onlyReplaceFailed(job *batchv1.Job) bool {
	if p := job.Spec.PodReplacementPolicy; p != nil {
		return *p == batchv1.Failed
	}
	return job.Spec.PodFailurePolicy != nil
}

func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// finishTime is when a terminal pod ended: its containers' latest finish,
// else its Ready condition's last change, else its deletion, else its
// creation.
func finishTime(pod *v1.Pod) time.Time {
	var t time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil && term.FinishedAt.After(t) {
			t = term.FinishedAt.Time
		}
	}
	if !t.IsZero() {
		return t
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionFalse && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if pod.DeletionTimestamp != nil {
		return pod.DeletionTimestamp.Time
	}
	return pod.CreationTimestamp.Time
}

// matchFailurePolicy returns the first podFailurePolicy rule matching a
// failed pod with its index, and the message a FailJob rule reports; nil
// when no rule matches (the failure counts).
func matchFailurePolicy(policy *batchv1.PodFailurePolicy, pod *v1.Pod) (*batchv1.PodFailurePolicyRule, string) {
	if policy == nil {
		return nil, ""
	}
	for i := range policy.Rules {
		rule := &policy.Rules[i]
		if r := rule.OnExitCodes; r != nil {
			if cs := matchExitCodes(r, pod); cs != nil {
				return rule, fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
					cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
			}
		}
		for _, pattern := range rule.OnPodConditions {
			for _, c := range pod.Status.Conditions {
				if c.Type == pattern.Type && c.Status == pattern.Status {
					return rule, fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
						pod.Namespace, pod.Name, c.Type, rule.Action, i)
				}
			}
		}
	}
	return nil, ""
}

// matchExitCodes finds a container (of the named one, if any) that
// terminated with a non-zero exit code the requirement selects.
func matchExitCodes(r *batchv1.PodFailurePolicyOnExitCodesRequirement, pod *v1.Pod) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			term := cs.State.Terminated
			if term == nil || term.ExitCode == 0 {
				continue
			}
			if r.ContainerName != nil && *r.ContainerName != cs.Name {
				continue
			}
			in := false
			for _, v := range r.Values {
				if v == term.ExitCode {
					in = true
					break
				}
			}
			if (r.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
				return cs
			}
		}
	}
	return nil
}

// indexFailureCount reads how many times the pod's index had failed before
// it was created; 0 when unset or malformed.
func indexFailureCount(pod *v1.Pod) int {
	n, err := strconv.Atoi(pod.Annotations[batchv1.JobIndexFailureCountAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
