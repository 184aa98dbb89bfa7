// Package podsecurity is Pod Security Admission for tranche's API server, what
// kube-apiserver's built-in PodSecurity admission plugin does: it evaluates pods, the pod
// templates of controllers and namespaces' pod-security.kubernetes.io labels with
// k8s.io/pod-security-admission, the library that plugin wraps, so the levels, checks
// and messages are Kubernetes' own.
//
// Per namespace, the labels pod-security.kubernetes.io/{enforce,audit,warn} choose a
// level (privileged, baseline, restricted) and .../{enforce,audit,warn}-version a policy
// version (latest, v1.N); unlabelled modes take the cluster defaults of Config.
//   - enforce: a violating pod is refused with 403 Forbidden (templates are not).
//   - warn: a violating pod or template gets a Warning header, which kubectl prints.
//   - audit: tranche has no audit log yet; the audit annotations Kubernetes would record
//     (pod-security.kubernetes.io/audit-violations, .../error) go to a structured log line.
//
// A namespace whose labels are invalid is refused on create, and on update when they
// change; raising a namespace's enforce level answers with warnings naming the existing
// pods that would violate it.
package podsecurity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	psadmission "k8s.io/pod-security-admission/admission"
	admissionapi "k8s.io/pod-security-admission/admission/api"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/metrics"
	"k8s.io/pod-security-admission/policy"

	"github.com/tranche/tranche/internal/apiserver"
)

// Config is the configuration kube-apiserver reads from its PodSecurityConfiguration.
type Config struct {
	// Defaults are the levels and versions of the modes a namespace does not label;
	// an empty level means privileged and an empty version latest, Kubernetes'
	// defaults.
	Defaults admissionapi.PodSecurityDefaults
	// Exemptions are never evaluated: requests of these users, objects in these
	// namespaces, pods of these runtime classes.
	Exemptions admissionapi.PodSecurityExemptions
}

// Complete returns cfg with its empty defaults filled in (privileged, latest).
func (cfg Config) Complete() Config {
	d := &cfg.Defaults
	for _, level := range []*string{&d.Enforce, &d.Audit, &d.Warn} {
		if *level == "" {
			*level = string(api.LevelPrivileged)
		}
	}
	for _, version := range []*string{&d.EnforceVersion, &d.AuditVersion, &d.WarnVersion} {
		if *version == "" {
			*version = api.VersionLatest
		}
	}
	return cfg
}

var (
	podsResource       = corev1.Resource("pods")
	namespacesResource = corev1.Resource("namespaces")
)

// Admission evaluates writes against the Pod Security Standards (apiserver.Validator).
type Admission struct {
	delegate *psadmission.Admission
	// userName returns the name of the user of a request's context ("" when none).
	userName func(context.Context) string
	log      *slog.Logger
	// logger is log for the library, which logs through klog's context logger.
	logger logr.Logger
}

var _ apiserver.Validator = (*Admission)(nil)

// New checks cfg (completed) and returns the admission step. userName tells the user of a
// request from its context, for the user exemptions; log receives the audit lines and
// the library's own errors.
func New(cfg Config, userName func(context.Context) string, log *slog.Logger) (*Admission, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = cfg.Complete()
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("pod security checks: %w", err)
	}
	conf := &admissionapi.PodSecurityConfiguration{Defaults: cfg.Defaults, Exemptions: cfg.Exemptions}
	d := &psadmission.Admission{
		Configuration:    conf,
		Evaluator:        evaluator,
		Metrics:          nopRecorder{},
		PodSpecExtractor: psadmission.DefaultPodSpecExtractor{},
		NamespaceGetter:  namespaceGetter{},
		PodLister:        podLister{},
	}
	if err := d.CompleteConfiguration(); err != nil {
		return nil, fmt.Errorf("pod security configuration: %w", err)
	}
	if err := d.ValidateConfiguration(); err != nil {
		return nil, fmt.Errorf("pod security configuration: %w", err)
	}
	return &Admission{delegate: d, userName: userName, log: log, logger: logr.FromSlogHandler(log.Handler())}, nil
}

// Validate implements apiserver.Validator for creates and updates of pods, namespaces
// and the resources with a pod template; it lets everything else through.
func (a *Admission) Validate(ctx context.Context, req *apiserver.AdmissionRequest) ([]string, error) {
	gr := req.Resource.GroupResource()
	if gr != podsResource && gr != namespacesResource && !a.delegate.PodSpecExtractor.HasPodSpec(gr) {
		return nil, nil
	}
	attrs := &api.AttributesRecord{
		Name:        req.Name,
		Namespace:   req.Namespace,
		Kind:        req.Kind,
		Resource:    req.Resource,
		Subresource: req.Subresource,
		Operation:   admissionv1.Create,
		Object:      req.Object,
	}
	if req.Operation == apiserver.AdmitUpdate {
		attrs.Operation = admissionv1.Update
		attrs.OldObject = req.OldObject
	}
	if gr == namespacesResource {
		// A namespace's own request is in that namespace (for the exemptions).
		attrs.Namespace = req.Name
	}
	if a.userName != nil {
		attrs.Username = a.userName(ctx)
	}
	ctx = context.WithValue(ctx, readerKey{}, req.Reader)
	ctx = klog.NewContext(ctx, a.logger)
	resp := a.delegate.Validate(ctx, attrs)
	a.audit(attrs, req.DryRun, resp.AuditAnnotations)
	if !resp.Allowed {
		return nil, refusal(attrs, resp.Result)
	}
	return resp.Warnings, nil
}

// refusal is the error of a refused request: Forbidden unless the library's result says
// otherwise (Invalid for bad namespace labels), with the library's message.
func refusal(attrs *api.AttributesRecord, result *metav1.Status) error {
	out := apierrors.NewForbidden(attrs.Resource.GroupResource(), attrs.Name, errors.New("Not allowed by PodSecurity"))
	if result == nil {
		return out
	}
	if result.Message != "" {
		out.ErrStatus.Message = result.Message
	}
	if result.Reason != "" {
		out.ErrStatus.Reason = result.Reason
	}
	if result.Details != nil {
		out.ErrStatus.Details = result.Details
	}
	if result.Code != 0 {
		out.ErrStatus.Code = result.Code
	}
	return out
}

// audit writes the audit annotations Kubernetes would add to the request's audit event
// (keys prefixed pod-security.kubernetes.io/) as one log line, when they report a
// violation or an error; tranche has no audit log yet.
func (a *Admission) audit(attrs *api.AttributesRecord, dry bool, annotations map[string]string) {
	_, violation := annotations[api.AuditViolationsAnnotationKey]
	_, failed := annotations["error"]
	if !violation && !failed {
		return
	}
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []any{"operation", string(attrs.Operation), "resource", attrs.Resource.GroupResource().String(),
		"namespace", attrs.Namespace, "name", attrs.Name, "user", attrs.Username}
	if attrs.Subresource != "" {
		args = append(args, "subresource", attrs.Subresource)
	}
	if dry {
		args = append(args, "dryRun", true)
	}
	for _, k := range keys {
		args = append(args, api.AuditAnnotationPrefix+k, annotations[k])
	}
	a.log.Info("pod security audit", args...)
}

// readerKey carries a request's apiserver.Reader to the library's getters.
type readerKey struct{}

func readerFrom(ctx context.Context) (apiserver.Reader, error) {
	r, _ := ctx.Value(readerKey{}).(apiserver.Reader)
	if r == nil {
		return nil, errors.New("no API reader in the request context")
	}
	return r, nil
}

// namespaceGetter gives the library a namespace with its labels, read from the API
// server's namespace cache.
type namespaceGetter struct{}

// GetNamespace returns a namespace with its name and labels only: all the library reads.
func (namespaceGetter) GetNamespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	r, err := readerFrom(ctx)
	if err != nil {
		return nil, err
	}
	labels, err := r.NamespaceLabels(ctx, name)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	ns.Name, ns.Labels = name, labels
	return ns, nil
}

// podLister gives the library the pods of a namespace, read from storage.
type podLister struct{}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// ListPods returns the pods of a namespace.
func (podLister) ListPods(ctx context.Context, namespace string) ([]*corev1.Pod, error) {
	r, err := readerFrom(ctx)
	if err != nil {
		return nil, err
	}
	objs, err := r.List(ctx, podsGVR, namespace)
	if err != nil {
		return nil, err
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

// nopRecorder drops the library's metrics: tranche's API server serves no metrics yet.
type nopRecorder struct{}

var _ metrics.Recorder = nopRecorder{}

// RecordEvaluation drops an evaluation.
func (nopRecorder) RecordEvaluation(metrics.Decision, api.LevelVersion, metrics.Mode, api.Attributes) {
}

// RecordExemption drops an exemption.
func (nopRecorder) RecordExemption(api.Attributes) {}

// RecordError drops an error.
func (nopRecorder) RecordError(bool, api.Attributes) {}
