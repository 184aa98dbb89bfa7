package scheduling

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
)

// DefaultClass returns the class marked globalDefault, nil when there is none; of
// several (two created at once), the one with the lowest value, as kube-apiserver picks.
func DefaultClass(classes []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def
}

// AdmitPodCreate resolves a new pod's priority as kube-apiserver's Priority admission
// plugin does: spec.priorityClassName names the class (empty: the globalDefault class,
// whose name is then written; none: priority 0 and PreemptLowerPriority), whose value
// becomes spec.priority and whose preemptionPolicy becomes spec.preemptionPolicy. A pod
// that names an unknown class or sets a priority or policy other than the class's is
// refused; the error text is upstream's, for a Forbidden status.
func AdmitPodCreate(pod *v1.Pod, classes []*schedulingv1.PriorityClass) error {
	name := pod.Spec.PriorityClassName
	var value int32
	var policy *v1.PreemptionPolicy
	if name == "" {
		if def := DefaultClass(classes); def != nil {
			name, value, policy = def.Name, def.Value, def.PreemptionPolicy
		} else {
			lower := v1.PreemptLowerPriority
			policy = &lower
		}
	} else {
		var pc *schedulingv1.PriorityClass
		for _, c := range classes {
			if c.Name == name {
				pc = c
				break
			}
		}
		if pc == nil {
			return fmt.Errorf("no PriorityClass with name %v was found", name)
		}
		value, policy = pc.Value, pc.PreemptionPolicy
	}
	pod.Spec.PriorityClassName = name
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value)
	}
	pod.Spec.Priority = &value
	if policy != nil {
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
			return fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy)
		}
		p := *policy
		pod.Spec.PreemptionPolicy = &p
	}
	return nil
}

// AdmitPodUpdate keeps the priority and preemption policy admission gave the pod when
// an update leaves them out; changing them is the pod validation's to refuse.
func AdmitPodUpdate(pod, old *v1.Pod) {
	if pod.Spec.Priority == nil && old.Spec.Priority != nil {
		p := *old.Spec.Priority
		pod.Spec.Priority = &p
	}
	if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
		p := *old.Spec.PreemptionPolicy
		pod.Spec.PreemptionPolicy = &p
	}
}

// CheckGlobalDefault refuses a class that would be a second globalDefault: created as
// one while another is, or updated to be one while another is. The error text is
// upstream's, for a Forbidden status.
func CheckGlobalDefault(pc *schedulingv1.PriorityClass, create bool, classes []*schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault {
		return nil
	}
	def := DefaultClass(classes)
	if def == nil || (!create && def.Name == pc.Name) {
		return nil
	}
	return fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name)
}
