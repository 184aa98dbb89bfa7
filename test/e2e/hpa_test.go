package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHPAKubectl: `kubectl autoscale`, `get hpa` and `describe hpa` against the shared
// server, as on any cluster; without PodMetrics for its pods (no nodes run them here) the
// HPA says so in ScalingActive=False FailedGetResourceMetric and an event, the v1 view
// shows the same object, and raising minReplicas resizes the Deployment.
func TestHPAKubectl(t *testing.T) {
	s := shared
	ns := s.namespace(t)
	s.must(t, "create", "deployment", "web", "-n", ns, "--image=busybox:1.37", "--", "sleep", "3600")
	if out := s.must(t, "autoscale", "deployment", "web", "-n", ns, "--cpu-percent=50", "--min=1", "--max=5"); !strings.Contains(out, "horizontalpodautoscaler.autoscaling/web autoscaled") {
		t.Fatalf("kubectl autoscale: %s", out)
	}

	out := s.must(t, "get", "hpa", "-n", ns)
	if !regexp.MustCompile(`(?m)^NAME\s+REFERENCE\s+TARGETS\s+MINPODS\s+MAXPODS\s+REPLICAS\s+AGE$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^web\s+Deployment/web\s+cpu: <unknown>/50%\s+1\s+5\s+\d+\s+\d+s$`).MatchString(out) {
		t.Fatalf("kubectl get hpa:\n%s", out)
	}

	eventually(t, 60*time.Second, "ScalingActive=False FailedGetResourceMetric", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "hpa", "web", "-n", ns, "-o",
			`jsonpath={.status.conditions[?(@.type=="ScalingActive")].status} {.status.conditions[?(@.type=="ScalingActive")].reason} {.status.conditions[?(@.type=="ScalingActive")].message}`)
		return strings.HasPrefix(out, "False FailedGetResourceMetric the HPA was unable to compute the replica count: failed to get cpu utilization: unable to get metrics for resource cpu: "), out
	})
	out = s.must(t, "describe", "hpa", "web", "-n", ns)
	for _, re := range []string{
		`(?m)^Reference:\s+Deployment/web$`,
		`(?m)^Metrics:\s+\( current / target \)$`,
		`(?m)^\s+resource cpu on pods\s+\(as a percentage of request\):\s+<unknown> / 50%$`,
		`(?m)^Min replicas:\s+1$`,
		`(?m)^Max replicas:\s+5$`,
		`(?m)^\s+AbleToScale\s+True\s+SucceededGetScale\s+the HPA controller was able to get the target's current scale$`,
		`(?m)^\s+ScalingActive\s+False\s+FailedGetResourceMetric\s+the HPA was unable to compute the replica count: `,
		`(?m)^\s+Warning\s+FailedGetResourceMetric\s+.*horizontal-pod-autoscaler\s+failed to get cpu utilization: `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("kubectl describe hpa lacks %s:\n%s", re, out)
		}
	}

	// autoscaling/v1 is a view of the same object.
	v1 := s.must(t, "get", "--raw", "/apis/autoscaling/v1/namespaces/"+ns+"/horizontalpodautoscalers/web")
	for _, want := range []string{`"apiVersion":"autoscaling/v1"`, `"targetCPUUtilizationPercentage":50`, `autoscaling.alpha.kubernetes.io/conditions`} {
		if !strings.Contains(v1, want) {
			t.Fatalf("v1 view lacks %s:\n%s", want, v1)
		}
	}

	// Raising minReplicas resizes the Deployment through its scale subresource at once
	// (a spec change is synced without waiting for the period), metrics or not.
	s.must(t, "patch", "hpa", "web", "-n", ns, "--type=merge", "-p", `{"spec":{"minReplicas":2}}`)
	eventually(t, 30*time.Second, "deployment scaled to minReplicas", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		return out == "2", out
	})
	eventually(t, 30*time.Second, "SuccessfulRescale event", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "reason=SuccessfulRescale", "-o", "jsonpath={.items[*].message}")
		return out == "New size: 2; reason: Current number of replicas below Spec.MinReplicas", out
	})

	// Bad input is refused with Kubernetes' field errors.
	_, errOut, err := s.kubectl(t, `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: bad}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment}
  minReplicas: 3
  maxReplicas: 2
`, "create", "-n", ns, "-f", "-")
	if err == nil || !strings.Contains(errOut, "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`") ||
		!strings.Contains(errOut, "spec.scaleTargetRef.name: Required value") {
		t.Fatalf("invalid HPA: err=%v\n%s", err, errOut)
	}
}

// burnDeployment runs busy-looping containers held to their 100m request by a CPU limit.
const burnDeployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: burn}
spec:
  replicas: 1
  selector: {matchLabels: {app: burn}}
  template:
    metadata: {labels: {app: burn}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: busybox:1.37
        command: ["sh", "-c", "while :; do :; done"]
        resources:
          requests: {cpu: 100m}
          limits: {cpu: 100m}
`

const burnHPA = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: burn}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: burn}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 50}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
`

// TestHPAScalesDeployment: on the shared cluster (HPAs synced every 5 s), a Deployment
// burning its whole CPU request grows beyond one replica, and shrinks back to one when its
// container is patched to idle, on the CPU usage the resource metrics API
// (metrics.k8s.io) reports.
func TestHPAScalesDeployment(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	c.apply(t, ns, burnDeployment)
	c.apply(t, ns, burnHPA)

	replicas := func() int {
		out, _, _ := s.kubectl(t, "", "get", "deploy", "burn", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		n, _ := strconv.Atoi(out)
		return n
	}
	hpaState := func() string {
		out, _, _ := s.kubectl(t, "", "get", "hpa", "burn", "-n", ns, "--no-headers")
		return out
	}
	eventually(t, 3*time.Minute, "scale-up beyond 1 replica", func() (bool, string) {
		return replicas() > 1, hpaState()
	})
	if out := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale", "-o", "jsonpath={.items[*].message}"); !regexp.MustCompile(`New size: [23]; reason: cpu resource utilization \(percentage of request\) above target`).MatchString(out) {
		t.Fatalf("SuccessfulRescale event: %q", out)
	}

	s.must(t, "patch", "deployment", "burn", "-n", ns, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/template/spec/containers/0/command","value":["sleep","3600"]}]`)
	eventually(t, 4*time.Minute, "scale-down to 1 replica", func() (bool, string) {
		return replicas() == 1, hpaState()
	})
	if out := s.must(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale", "-o", "jsonpath={.items[*].message}"); !strings.Contains(out, "New size: 1; reason: All metrics below target") {
		t.Fatalf("SuccessfulRescale events: %q", out)
	}
}

// TestHPAExternalMetric: an HPA on an External metric scales its Deployment on what an
// external metrics API (agnhost's external-metrics server, registered as
// v1beta1.external.metrics.k8s.io) reports, as kube-controller-manager's does: a total
// of 6 against a target of 2 with one ready pod asks for 3 replicas (the default
// scale-up policy allows that in one step).
func TestHPAExternalMetric(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "apiservice", "v1beta1.external.metrics.k8s.io", "--ignore-not-found")
	})
	c.apply(t, ns, `apiVersion: v1
kind: Pod
metadata: {name: ems, labels: {app: ems}}
spec:
  containers:
  - name: ems
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["external-metrics", "--port=6443"]
    readinessProbe: {tcpSocket: {port: 6443}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: ems}
spec:
  selector: {app: ems}
  ports: [{port: 443, targetPort: 6443}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: queued}
spec:
  replicas: 1
  selector: {matchLabels: {app: queued}}
  template:
    metadata: {labels: {app: queued}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: c, image: busybox, command: ["sleep", "3600"]}
`)
	c.apply(t, "", `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1beta1.external.metrics.k8s.io}
spec:
  group: external.metrics.k8s.io
  version: v1beta1
  service: {namespace: `+ns+`, name: ems, port: 443}
  insecureSkipTLSVerify: true
  groupPriorityMinimum: 100
  versionPriority: 100
`)
	client := s.client(t)
	ctx := context.Background()
	eventually(t, 90*time.Second, "the metric created on the external metrics server", func() (bool, string) {
		out, err := client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/"+ns+"/pods/https:ems:6443/proxy/create/queue").
			Param("value", "6").Param("labels", "queue=jobs").DoRaw(ctx)
		return err == nil && strings.Contains(string(out), `"status":"created"`), string(out) + fmt.Sprint(err)
	})
	eventually(t, 60*time.Second, "the external metric served through the API server", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "--raw", "/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/queue?labelSelector=queue%3Djobs")
		return err == nil && strings.Contains(out, `"metricName":"queue"`), out + errOut
	})
	c.apply(t, ns, `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: queued}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: queued}
  minReplicas: 1
  maxReplicas: 5
  metrics:
  - type: External
    external:
      metric: {name: queue, selector: {matchLabels: {queue: jobs}}}
      target: {type: Value, value: "2"}
`)
	eventually(t, 90*time.Second, "the Deployment scaled to 3 on the external metric", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "deploy", "queued", "-n", ns, "-o", "jsonpath={.spec.replicas}")
		return out == "3", out
	})
	got := s.must(t, "get", "hpa", "queued", "-n", ns, "-o",
		`jsonpath={.status.currentMetrics[0].external.current.value} {.status.conditions[?(@.type=="ScalingActive")].reason}`)
	if got != "6 ValidMetricFound" {
		t.Errorf("HPA status %q, want the external value 6 and ValidMetricFound", got)
	}
}
