package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API details the upstream [Conformance] specs check (conformance/README.md lists the
// specs that still fail), each as kube-apiserver and kube-controller-manager do them.

// TestStatusPatchKeepsMetadata: PATCH of /status keeps the labels and annotations it
// carries, as the Service, Ingress and CronJob specs ("should support ... status") read
// them back; a Deployment's status strategy keeps the stored labels.
func TestStatusPatchKeepsMetadata(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "create", "service", "clusterip", "svc", "--tcp=80:8080", "-n", ns)
	s.must(t, "create", "ingress", "ing", "--rule=example.com/=svc:80", "-n", ns)
	s.must(t, "create", "cronjob", "cj", "--image=busybox", "--schedule=0 0 1 1 *", "-n", ns)
	s.must(t, "create", "deployment", "dep", "--image=busybox", "-n", ns)

	for _, tc := range []struct {
		kind, name, patch, check, want string
	}{
		{"service", "svc", `{"metadata":{"labels":{"patchedstatus":"true"}},"status":{"conditions":[{"type":"StatusUpdate","status":"True","reason":"E2E","message":"Set from e2e test","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`,
			`{.metadata.labels.patchedstatus} {.status.conditions[0].reason}`, "true E2E"},
		// The service status lifecycle spec writes a condition without lastTransitionTime,
		// which kube-apiserver does not validate.
		{"service", "svc", `{"status":{"conditions":[{"type":"StatusUpdate","status":"True","reason":"NoTime","message":"Set from e2e test"}]}}`,
			`{.status.conditions[0].reason}`, "NoTime"},
		{"ingress", "ing", `{"metadata":{"labels":{"patchedstatus":"true"},"annotations":{"patchedstatus":"true"}},"status":{"loadBalancer":{"ingress":[{"ip":"203.0.113.2"}]}}}`,
			`{.metadata.labels.patchedstatus} {.metadata.annotations.patchedstatus} {.status.loadBalancer.ingress[0].ip}`, "true true 203.0.113.2"},
		{"cronjob", "cj", `{"metadata":{"annotations":{"patchedstatus":"true"}},"status":{"lastScheduleTime":"2026-01-02T03:04:05Z"}}`,
			`{.metadata.annotations.patchedstatus} {.status.lastScheduleTime}`, "true 2026-01-02T03:04:05Z"},
		// apps/v1 Deployment status: labels are the stored ones, annotations the written.
		{"deployment", "dep", `{"metadata":{"labels":{"patchedstatus":"true"},"annotations":{"patchedstatus":"true"}},"status":{"observedGeneration":1}}`,
			`{.metadata.labels.patchedstatus}-{.metadata.annotations.patchedstatus}`, "-true"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			s.must(t, "patch", tc.kind, tc.name, "-n", ns, "--subresource=status", "--type=merge", "-p", tc.patch)
			if got := s.must(t, "get", tc.kind, tc.name, "-n", ns, "-o", "jsonpath="+tc.check); got != tc.want {
				t.Errorf("%s after PATCH /status: %q, want %q", tc.kind, got, tc.want)
			}
		})
	}
}

// TestTableOnlyAcceptIs406: a Table-only Accept on an endpoint without a table
// convertor is 406 NotAcceptable ("should return a 406 for a backend which does not
// implement metadata" posts a SelfSubjectAccessReview so); a table of pods is served.
func TestTableOnlyAcceptIs406(t *testing.T) {
	s := shared
	c := s.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tableOnly = "application/json;as=Table;v=v1;g=meta.k8s.io"
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"}}}
	var code int
	err := c.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").SetHeader("Accept", tableOnly).
		Body(sar).Do(ctx).StatusCode(&code).Error()
	var st apierrors.APIStatus
	if code != http.StatusNotAcceptable || !errors.As(err, &st) || st.Status().Reason != metav1.StatusReasonNotAcceptable {
		t.Fatalf("POST selfsubjectaccessreviews with a Table-only Accept: %d %v, want 406 NotAcceptable", code, err)
	}
	// The same review with a JSON fallback, and a table of pods, are served.
	if err := c.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").SetHeader("Accept", tableOnly+",application/json").
		Body(sar).Do(ctx).StatusCode(&code).Error(); err != nil || code != http.StatusCreated {
		t.Errorf("review with a JSON fallback: %d %v, want 201", code, err)
	}
	if err := c.CoreV1().RESTClient().Get().Resource("pods").SetHeader("Accept", tableOnly).Do(ctx).StatusCode(&code).Error(); err != nil || code != http.StatusOK {
		t.Errorf("table of pods: %d %v, want 200", code, err)
	}
}

// TestNamespaceDeletesPodsFirst: ordered namespace deletion (KEP-5080, the spec
// "namespace deletion should delete pod first"): while a pod held by a finalizer
// remains, the terminating namespace keeps its other content and carries the deletion
// conditions; once the pod goes, the rest goes and the namespace with it.
func TestNamespaceDeletesPodsFirst(t *testing.T) {
	s := shared
	ns := "e2e-ns-pods-first"
	s.must(t, "create", "namespace", ns)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "patch", "pod", "test-pod", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		_, _, _ = s.kubectl(t, "", "delete", "namespace", ns, "--ignore-not-found", "--wait=false")
	})
	eventually(t, 20*time.Second, "default service account created", func() (bool, string) {
		_, errOut, err := s.kubectl(t, "", "get", "serviceaccount", "default", "-n", ns)
		return err == nil, errOut
	})
	manifest := `apiVersion: v1
kind: Pod
metadata:
  name: test-pod
  finalizers: ["e2e.example.com/finalizer"]
spec:
  containers:
  - name: nginx
    image: registry.k8s.io/pause:3.10
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: test-configmap
data: {key: value}
`
	if out, errOut, err := s.kubectl(t, manifest, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	s.must(t, "delete", "namespace", ns, "--wait=false")
	eventually(t, 30*time.Second, "namespace Terminating with a NamespaceDeletionContentFailure condition", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "namespace", ns, "-o",
			`jsonpath={.status.phase} {.status.conditions[?(@.type=="NamespaceDeletionContentFailure")].reason}`)
		return out == "Terminating ContentDeleted", out
	})
	// The controller has passed over the namespace at least once: the pod is marked,
	// the ConfigMap must still be there, and stays while the pod does.
	for range 3 {
		if out := s.must(t, "get", "pod", "test-pod", "-n", ns, "-o", "jsonpath={.metadata.deletionTimestamp}"); out == "" {
			t.Fatal("pod test-pod has no deletionTimestamp in the terminating namespace")
		}
		if _, errOut, err := s.kubectl(t, "", "get", "configmap", "test-configmap", "-n", ns); err != nil {
			t.Fatalf("configmap deleted while a pod remains: %s", errOut)
		}
		time.Sleep(time.Second)
	}
	s.must(t, "patch", "pod", "test-pod", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
	eventually(t, 60*time.Second, "namespace gone once the pod is", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "namespace", ns)
		return err != nil && strings.Contains(errOut, "NotFound"), out + errOut
	})
}

// TestPodGenerationObserved: a pod starts at generation 1 whatever the client sent, a
// spec change bumps it and the node agent reports it in status.observedGeneration and
// its conditions, metadata changes do not bump it, and a graceful deletion does (the
// "Pod Generation" specs of test/e2e/node/pods.go).
func TestPodGenerationObserved(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, `apiVersion: v1
kind: Pod
metadata:
  name: gen
  generation: 100
spec:
  terminationGracePeriodSeconds: 60
  activeDeadlineSeconds: 5000
  initContainers:
  - name: init
    image: busybox
    command: ["true"]
  containers:
  - name: app
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["pause"]
`)
	if g := s.must(t, "get", "pod", "gen", "-n", ns, "-o", "jsonpath={.metadata.generation}"); g != "1" {
		t.Fatalf("generation after create with 100: %s, want 1", g)
	}
	c.waitReady(t, ns, "gen")
	observed := func(want int) {
		t.Helper()
		eventually(t, 20*time.Second, fmt.Sprintf("generation and observedGeneration %d", want), func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pod", "gen", "-n", ns, "-o",
				`jsonpath={.metadata.generation} {.status.observedGeneration} {.status.conditions[?(@.type=="Ready")].observedGeneration}`)
			return out == fmt.Sprintf("%d %d %d", want, want, want), out
		})
	}
	observed(1)
	s.must(t, "patch", "pod", "gen", "-n", ns, "--type=merge", "-p", `{"spec":{"activeDeadlineSeconds":4999}}`)
	observed(2)
	s.must(t, "patch", "pod", "gen", "-n", ns, "--type=json", "-p",
		`[{"op":"replace","path":"/spec/containers/0/image","value":"registry.k8s.io/e2e-test-images/agnhost:2.53"}]`)
	observed(3)
	s.must(t, "annotate", "pod", "gen", "-n", ns, "key=value")
	s.must(t, "patch", "pod", "gen", "-n", ns, "--type=merge", "-p", `{"metadata":{"generation":1}}`)
	if g := s.must(t, "get", "pod", "gen", "-n", ns, "-o", "jsonpath={.metadata.generation}"); g != "3" {
		t.Fatalf("generation after metadata changes: %s, want 3", g)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pod v1.Pod
	var code int
	if err := s.client(t).CoreV1().RESTClient().Delete().Namespace(ns).Resource("pods").Name("gen").Param("gracePeriodSeconds", "60").
		Do(ctx).StatusCode(&code).Into(&pod); err != nil || code != http.StatusOK {
		t.Fatalf("graceful delete: %d %v", code, err)
	}
	if pod.Generation != 4 || pod.DeletionTimestamp == nil {
		t.Errorf("graceful delete answered generation %d deletionTimestamp %v, want 4 and set", pod.Generation, pod.DeletionTimestamp)
	}
	// Its container may stop at once on SIGTERM, and the kubelet then removes the pod
	// before the grace period ends, as Kubernetes' does.
	if g, errOut, err := s.kubectl(t, "", "get", "pod", "gen", "-n", ns, "-o", "jsonpath={.metadata.generation}"); err != nil && !strings.Contains(errOut, `pods "gen" not found`) {
		t.Errorf("get after a graceful delete: %v %s", err, errOut)
	} else if err == nil && g != "4" {
		t.Errorf("generation after a graceful delete: %s, want 4", g)
	}
}
