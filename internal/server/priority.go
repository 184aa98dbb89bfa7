package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/scheduling"
)

var (
	priorityClassesGVR = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	priorityClassesGR  = priorityClassesGVR.GroupResource()
)

// priorityMutator is the mutating half of kube-apiserver's Priority admission plugin:
// a pod created gets spec.priority and spec.preemptionPolicy from its PriorityClass (or
// the globalDefault one), a pod naming an unknown class is refused, and an update keeps
// what creation gave. Subresources are left alone, as upstream does.
type priorityMutator struct{}

// priorityValidator is the validating half: at most one globalDefault PriorityClass,
// and the system classes are never deleted (kube-apiserver's PriorityClass storage
// refuses that; here the delete is refused before anything is written).
type priorityValidator struct{}

var (
	_ apiserver.Mutator         = priorityMutator{}
	_ apiserver.Validator       = priorityValidator{}
	_ apiserver.OperationFilter = priorityValidator{}
)

// Mutate implements apiserver.Mutator.
func (priorityMutator) Mutate(ctx context.Context, req *apiserver.AdmissionRequest) error {
	if req.Resource.Group != "" || req.Resource.Resource != "pods" || req.Subresource != "" {
		return nil
	}
	pod, ok := req.Object.(*v1.Pod)
	if !ok || pod == nil {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if req.Operation == apiserver.AdmitUpdate {
		if old, ok := req.OldObject.(*v1.Pod); ok && old != nil {
			scheduling.AdmitPodUpdate(pod, old)
		}
		return nil
	}
	if req.Operation != apiserver.AdmitCreate {
		return nil
	}
	classes, err := listPriorityClasses(ctx, req.Reader)
	if err != nil {
		return err
	}
	if err := scheduling.AdmitPodCreate(pod, classes); err != nil {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, req.Name, err)
	}
	return nil
}

// HandlesOperation implements apiserver.OperationFilter: deletes are seen too.
func (priorityValidator) HandlesOperation(op apiserver.AdmitOp) bool {
	return op == apiserver.AdmitCreate || op == apiserver.AdmitUpdate || op == apiserver.AdmitDelete
}

// Validate implements apiserver.Validator.
func (priorityValidator) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	if req.Resource.GroupResource() != priorityClassesGR || req.Subresource != "" {
		return nil, nil
	}
	if req.Operation == apiserver.AdmitDelete {
		if scheduling.IsSystemPriorityClass(req.Name) {
			return nil, apierrors.NewForbidden(priorityClassesGR, req.Name, errors.New("this is a system priority class and cannot be deleted"))
		}
		return nil, nil
	}
	pc, ok := req.Object.(*schedulingv1.PriorityClass)
	if !ok || pc == nil {
		return nil, apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !pc.GlobalDefault {
		return nil, nil
	}
	classes, err := listPriorityClasses(ctx, req.Reader)
	if err != nil {
		return nil, err
	}
	if err := scheduling.CheckGlobalDefault(pc, req.Operation == apiserver.AdmitCreate, classes); err != nil {
		return nil, apierrors.NewForbidden(priorityClassesGR, req.Name, err)
	}
	return nil, nil
}

func listPriorityClasses(ctx context.Context, r apiserver.Reader) ([]*schedulingv1.PriorityClass, error) {
	objs, err := r.List(ctx, priorityClassesGVR, "")
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing PriorityClasses: %w", err))
	}
	out := make([]*schedulingv1.PriorityClass, 0, len(objs))
	for _, o := range objs {
		if pc, ok := o.(*schedulingv1.PriorityClass); ok {
			out = append(out, pc)
		}
	}
	return out, nil
}

// ensureSystemPriorityClasses creates system-node-critical and system-cluster-critical
// when they are missing, as kube-apiserver's bootstrap-system-priority-classes hook
// does; existing ones are left as they are.
func ensureSystemPriorityClasses(ctx context.Context, client kubernetes.Interface, log *slog.Logger) error {
	for _, pc := range scheduling.SystemPriorityClasses() {
		_, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
		switch {
		case err == nil:
			log.Info("created system PriorityClass", "name", pc.Name, "value", pc.Value)
		case apierrors.IsAlreadyExists(err):
		default:
			return fmt.Errorf("system PriorityClass %s: %w", pc.Name, err)
		}
	}
	return nil
}
