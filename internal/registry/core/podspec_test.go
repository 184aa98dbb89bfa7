package core

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// makePod returns a small valid pod, changed by mutate.
func makePod(mutate func(*v1.Pod)) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", Image: "nginx:1.27"}},
		},
	}
	if mutate != nil {
		mutate(pod)
	}
	return pod
}

// errString renders a list the way the API server's 422 message lists causes.
func errString(errs field.ErrorList) string {
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}

func TestDefaultPodSpec(t *testing.T) {
	grace := int64(30)
	tests := []struct {
		name string
		in   v1.PodSpec
		want v1.PodSpec
	}{{
		name: "pod-level defaults and container defaults",
		in: v1.PodSpec{Containers: []v1.Container{{
			Name: "app", Image: "busybox",
			Ports: []v1.ContainerPort{{ContainerPort: 80}},
		}}},
		want: v1.PodSpec{
			Containers: []v1.Container{{
				Name: "app", Image: "busybox",
				Ports:                    []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}},
				ImagePullPolicy:          v1.PullAlways,
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
			}},
			RestartPolicy:                 v1.RestartPolicyAlways,
			DNSPolicy:                     v1.DNSClusterFirst,
			TerminationGracePeriodSeconds: &grace,
			SchedulerName:                 "default-scheduler",
			SecurityContext:               &v1.PodSecurityContext{},
		},
	}, {
		name: "explicit values are kept and the deprecated service account is mirrored",
		in: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever, DNSPolicy: v1.DNSDefault, SchedulerName: "mine",
			TerminationGracePeriodSeconds: ptr.To[int64](5), SecurityContext: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](7)},
			DeprecatedServiceAccount: "robot",
		},
		want: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever, DNSPolicy: v1.DNSDefault, SchedulerName: "mine",
			TerminationGracePeriodSeconds: ptr.To[int64](5), SecurityContext: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](7)},
			DeprecatedServiceAccount: "robot", ServiceAccountName: "robot",
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.DeepCopy()
			DefaultPodSpec(got)
			if d := cmp.Diff(&tc.want, got); d != "" {
				t.Errorf("DefaultPodSpec (-want +got):\n%s", d)
			}
		})
	}
}

func TestDefaultPullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  v1.PullPolicy
	}{
		{"busybox", v1.PullAlways},
		{"busybox:latest", v1.PullAlways},
		{"busybox:1.36", v1.PullIfNotPresent},
		{"registry.k8s.io/e2e-test-images/agnhost:2.53", v1.PullIfNotPresent},
		{"localhost:5000/app", v1.PullAlways},
		{"nginx@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullIfNotPresent},
		{"nginx:latest@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", v1.PullAlways},
		{"NotValid", v1.PullIfNotPresent},
		{"", v1.PullIfNotPresent},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			if got := podDefaultPullPolicy(tc.image); got != tc.want {
				t.Errorf("podDefaultPullPolicy(%q) = %s, want %s", tc.image, got, tc.want)
			}
		})
	}
}

func TestDefaultPodSpecNested(t *testing.T) {
	spec := &v1.PodSpec{
		Containers: []v1.Container{{
			Name: "app", Image: "nginx:1",
			LivenessProbe:  &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
			ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9}}, PeriodSeconds: 2},
			Env:            []v1.EnvVar{{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
			Resources:      v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("0.0001")}},
		}},
		Volumes: []v1.Volume{
			{Name: "scratch"},
			{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}},
			{Name: "sec", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: ptr.To[int32](0400)}}},
			{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp"}}},
			{Name: "token", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}}}}}},
		},
	}
	DefaultPodSpec(spec)
	c := spec.Containers[0]
	checks := []struct {
		name      string
		got, want interface{}
	}{
		{"liveness probe timings", []int32{c.LivenessProbe.TimeoutSeconds, c.LivenessProbe.PeriodSeconds, c.LivenessProbe.SuccessThreshold, c.LivenessProbe.FailureThreshold}, []int32{1, 10, 1, 3}},
		{"httpGet path and scheme", []string{c.LivenessProbe.HTTPGet.Path, string(c.LivenessProbe.HTTPGet.Scheme)}, []string{"/", "HTTP"}},
		{"explicit period kept", c.ReadinessProbe.PeriodSeconds, int32(2)},
		{"grpc service", c.ReadinessProbe.GRPC.Service, ptr.To("")},
		{"fieldRef apiVersion", c.Env[0].ValueFrom.FieldRef.APIVersion, "v1"},
		{"cpu rounded to milli", c.Resources.Limits.Cpu().String(), "1m"},
		{"empty volume becomes emptyDir", spec.Volumes[0].EmptyDir, &v1.EmptyDirVolumeSource{}},
		{"configMap mode", spec.Volumes[1].ConfigMap.DefaultMode, ptr.To[int32](420)},
		{"secret mode kept", spec.Volumes[2].Secret.DefaultMode, ptr.To[int32](0400)},
		{"hostPath type", spec.Volumes[3].HostPath.Type, ptr.To(v1.HostPathUnset)},
		{"projected mode", spec.Volumes[4].Projected.DefaultMode, ptr.To[int32](420)},
		{"token expiration", spec.Volumes[4].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds, ptr.To[int64](3600)},
		{"no requests on a bare spec", c.Resources.Requests, v1.ResourceList(nil)},
		{"no enableServiceLinks on a bare spec", spec.EnableServiceLinks, (*bool)(nil)},
	}
	for _, tc := range checks {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, tc.got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestValidatePodSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{{
		name:   "valid",
		mutate: func(p *v1.Pod) {},
	}, {
		name:   "no containers",
		mutate: func(p *v1.Pod) { p.Spec.Containers = nil },
		want:   "spec.containers: Required value",
	}, {
		name:   "container name not a DNS label",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Name = "App_1" },
		want:   `spec.containers[0].name: Invalid value: "App_1": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
	}, {
		name: "duplicate names across containers and init containers",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "app", Image: "x"})
			p.Spec.InitContainers = []v1.Container{{Name: "app", Image: "x"}}
		},
		want: `[spec.containers[1].name: Duplicate value: "app", spec.initContainers[0].name: Duplicate value: "app"]`,
	}, {
		name:   "image required",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Image = "" },
		want:   "spec.containers[0].image: Required value",
	}, {
		name:   "container port out of range",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 70000}} },
		want:   "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
	}, {
		name:   "container port zero",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 0}} },
		want:   "spec.containers[0].ports[0].containerPort: Required value",
	}, {
		name: "bad protocol",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: "ICMP"}}
		},
		want: `spec.containers[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP"`,
	}, {
		name: "port names: IANA_SVC_NAME and unique",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 80}, {Name: "http", ContainerPort: 81}, {Name: "Web_1", ContainerPort: 82}}
		},
		want: `[spec.containers[0].ports[1].name: Duplicate value: "http", spec.containers[0].ports[2].name: Invalid value: "Web_1": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)]`,
	}, {
		name:   "env var name",
		mutate: func(p *v1.Pod) { p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A=B"}, {Name: ""}} },
		want:   `[spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of printable ASCII characters other than '=', spec.containers[0].env[1].name: Required value]`,
	}, {
		name: "env fieldRef path",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nope"}}}}
		},
		want: `spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: "spec.nope": error converting fieldPath: field label not supported: spec.nope`,
	}, {
		name: "volume names unique and one source",
		mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
				{Name: "b", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{Path: "/x"}}},
			}
		},
		want: `[spec.volumes[1].name: Duplicate value: "a", spec.volumes[2].emptyDir: Forbidden: may not specify more than 1 volume type]`,
	}, {
		name: "volumeMount of an unknown volume",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
		},
		want: `spec.containers[0].volumeMounts[0].name: Not found: "data"`,
	}, {
		name: "hostPath with backsteps",
		mutate: func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/a/../etc"}}}}
		},
		want: `spec.volumes[0].hostPath.path: Invalid value: "/a/../etc": must not contain '..'`,
	}, {
		name: "probe with two handlers and a liveness successThreshold",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].LivenessProbe = &v1.Probe{
				ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}, TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}},
				SuccessThreshold: 2,
			}
		},
		want: `[spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type, spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1]`,
	}, {
		name: "probe without handler and negative period",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].StartupProbe = &v1.Probe{PeriodSeconds: -1}
		},
		want: `[spec.containers[0].startupProbe: Required value: must specify a handler type, spec.containers[0].startupProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0]`,
	}, {
		name: "probe on a plain init container",
		mutate: func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "x", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}}}
		},
		want: `spec.initContainers[0].readinessProbe: Forbidden: may not be set for init containers without restartPolicy=Always`,
	}, {
		name:   "restartPolicy",
		mutate: func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" },
		want:   `spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
	}, {
		name:   "dnsPolicy",
		mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = "Google" },
		want:   `spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"`,
	}, {
		name: "dnsConfig limits",
		mutate: func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", "8.8.4.4"}}
		},
		want: `spec.dnsConfig.nameservers: Invalid value: ["1.1.1.1","1.0.0.1","8.8.8.8","8.8.4.4"]: must not have more than 3 nameservers`,
	}, {
		name:   "dnsPolicy None needs a config",
		mutate: func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone },
		want:   "spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None",
	}, {
		name:   "hostname",
		mutate: func(p *v1.Pod) { p.Spec.Hostname = "web.1" },
		want:   `spec.hostname: Invalid value: "web.1": must not contain dots`,
	}, {
		name:   "nodeSelector label value",
		mutate: func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "a b"} },
		want:   `spec.nodeSelector: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
	}, {
		name:   "toleration without key must be Exists",
		mutate: func(p *v1.Pod) { p.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpEqual, Value: "x"}} },
		want:   `spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when ` + "`key`" + ` is empty, which means "match all values and all keys"`,
	}, {
		name: "tolerationSeconds needs NoExecute",
		mutate: func(p *v1.Pod) {
			p.Spec.Tolerations = []v1.Toleration{{Key: "k", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule, TolerationSeconds: ptr.To[int64](5)}}
		},
		want: `spec.tolerations[0].effect: Invalid value: "NoSchedule": effect must be 'NoExecute' when ` + "`tolerationSeconds`" + ` is set`,
	}, {
		name: "requests above limits",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")},
				Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
			}
		},
		want: `spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1`,
	}, {
		name: "unknown resource name",
		mutate: func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{"gpu": resource.MustParse("1")}}
		},
		want: `spec.containers[0].resources.requests[gpu]: Invalid value: "gpu": must be a standard resource for containers`,
	}, {
		name:   "negative grace period",
		mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](-1) },
		want:   "spec.terminationGracePeriodSeconds: Invalid value: -1: must be greater than or equal to 0",
	}, {
		name:   "activeDeadlineSeconds zero",
		mutate: func(p *v1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](0) },
		want:   "spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive",
	}, {
		name:   "serviceAccountName",
		mutate: func(p *v1.Pod) { p.Spec.ServiceAccountName = "Robot" },
		want:   `spec.serviceAccountName: Invalid value: "Robot": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
	}, {
		name:   "runAsUser",
		mutate: func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsUser: ptr.To[int64](-5)} },
		want:   "spec.securityContext.runAsUser: Invalid value: -5: must be between 0 and 2147483647, inclusive",
	}, {
		name:   "readinessGate condition type",
		mutate: func(p *v1.Pod) { p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "bad gate"}} },
		want:   `spec.readinessGates[0].conditionType: Invalid value: "bad gate": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := makePod(tc.mutate)
			podDefault(pod)
			if got := errString(ValidatePodSpec(&pod.Spec, field.NewPath("spec"))); got != tc.want {
				t.Errorf("ValidatePodSpec:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestValidatePodTemplateSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*v1.PodTemplateSpec)
		want   string
	}{{
		name:   "valid",
		mutate: func(*v1.PodTemplateSpec) {},
	}, {
		name:   "bad label key",
		mutate: func(tpl *v1.PodTemplateSpec) { tpl.Labels = map[string]string{"-app": "x"} },
		want:   `spec.template.labels: Invalid value: "-app": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
	}, {
		name:   "spec errors under the template path",
		mutate: func(tpl *v1.PodTemplateSpec) { tpl.Spec.Containers[0].Image = "" },
		want:   "spec.template.spec.containers[0].image: Required value",
	}, {
		name: "ephemeral containers",
		mutate: func(tpl *v1.PodTemplateSpec) {
			tpl.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "x"}}}
		},
		want: "spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl := &v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       makePod(nil).Spec,
			}
			tc.mutate(tpl)
			DefaultPodSpec(&tpl.Spec)
			got := errString(ValidatePodTemplateSpec(tpl, field.NewPath("spec", "template")))
			if got != tc.want {
				t.Errorf("ValidatePodTemplateSpec:\n got: %s\nwant: %s", got, tc.want)
			}
		})
	}
}

func TestValidatePodSpecNil(t *testing.T) {
	if got := errString(ValidatePodSpec(nil, field.NewPath("spec"))); !strings.Contains(got, "Required value") {
		t.Errorf("nil spec: %q", got)
	}
}
