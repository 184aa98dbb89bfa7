package core

import (
	"regexp"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultPodSpec fills a pod spec's defaults as Kubernetes' defaulters do for a PodSpec
// wherever it appears (a pod or a workload's template): restartPolicy Always, dnsPolicy
// ClusterFirst, terminationGracePeriodSeconds 30, schedulerName default-scheduler, an empty
// securityContext, and for every container imagePullPolicy, terminationMessagePath/Policy,
// port protocols, probe timings and HTTP probe scheme/path, env fieldRef apiVersion, plus
// the volume sources' defaults (an empty volume becomes an emptyDir, file modes 0644, ...).
//
// Defaults Kubernetes applies only to Pod objects (enableServiceLinks, requests copied from
// limits, hostPort = containerPort under hostNetwork) are not set here: a Deployment's
// template does not carry them in a real cluster either. PodResource's Default adds them.
// serviceAccountName is admission's business and stays untouched.
func DefaultPodSpec(spec *v1.PodSpec) {
	if spec == nil {
		return
	}
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = v1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &v1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(v1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = v1.DefaultSchedulerName
	}
	// The v1 API keeps the deprecated serviceAccount field as an alias; the conversion of a
	// real API server fills one from the other, so a pod shows both.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName

	for i := range spec.Containers {
		podDefaultContainer(&spec.Containers[i])
	}
	for i := range spec.InitContainers {
		podDefaultContainer(&spec.InitContainers[i])
	}
	for i := range spec.EphemeralContainers {
		c := v1.Container(spec.EphemeralContainers[i].EphemeralContainerCommon)
		podDefaultContainer(&c)
		spec.EphemeralContainers[i].EphemeralContainerCommon = v1.EphemeralContainerCommon(c)
	}
	for i := range spec.Volumes {
		podDefaultVolume(&spec.Volumes[i])
	}
}

// podDefaultContainer applies SetDefaults_Container and the defaults of everything a
// container holds (ports, probes, lifecycle handlers, env sources, resource lists).
func podDefaultContainer(c *v1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = podDefaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = v1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = v1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = v1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	podDefaultProbe(c.LivenessProbe)
	podDefaultProbe(c.ReadinessProbe)
	podDefaultProbe(c.StartupProbe)
	if c.Lifecycle != nil {
		for _, h := range []*v1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				podDefaultHTTPGet(h.HTTPGet)
			}
		}
	}
	podRoundResourceList(c.Resources.Limits)
	podRoundResourceList(c.Resources.Requests)
}

// podRoundResourceList rounds quantities up to milli precision, as SetDefaults_ResourceList
// does, so "0.0001" CPU is stored as "1m" and compares the way the scheduler sees it.
func podRoundResourceList(list v1.ResourceList) {
	for name, q := range list {
		q.RoundUp(resource.Milli)
		list[name] = q
	}
}

func podDefaultProbe(p *v1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	podDefaultHTTPGet(p.HTTPGet)
	if p.GRPC != nil && p.GRPC.Service == nil {
		service := ""
		p.GRPC.Service = &service
	}
}

func podDefaultHTTPGet(h *v1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = v1.URISchemeHTTP
	}
}

// podDefaultVolume applies the volume source defaulters. A volume with no source at all
// becomes an emptyDir, exactly as SetDefaults_Volume does.
func podDefaultVolume(vol *v1.Volume) {
	src := &vol.VolumeSource
	if podVolumeSourceCount(src) == 0 {
		src.EmptyDir = &v1.EmptyDirVolumeSource{}
	}
	mode := func(m **int32) {
		if *m == nil {
			d := v1.SecretVolumeSourceDefaultMode
			*m = &d
		}
	}
	if src.Secret != nil {
		mode(&src.Secret.DefaultMode)
	}
	if src.ConfigMap != nil {
		mode(&src.ConfigMap.DefaultMode)
	}
	if src.DownwardAPI != nil {
		mode(&src.DownwardAPI.DefaultMode)
		for i := range src.DownwardAPI.Items {
			if f := src.DownwardAPI.Items[i].FieldRef; f != nil && f.APIVersion == "" {
				f.APIVersion = "v1"
			}
		}
	}
	podDefaultImageVolume(src.Image)
	if src.Projected != nil {
		mode(&src.Projected.DefaultMode)
		for i := range src.Projected.Sources {
			s := &src.Projected.Sources[i]
			if s.ServiceAccountToken != nil && s.ServiceAccountToken.ExpirationSeconds == nil {
				exp := int64(3600)
				s.ServiceAccountToken.ExpirationSeconds = &exp
			}
			if s.DownwardAPI != nil {
				for j := range s.DownwardAPI.Items {
					if f := s.DownwardAPI.Items[j].FieldRef; f != nil && f.APIVersion == "" {
						f.APIVersion = "v1"
					}
				}
			}
		}
	}
	if src.HostPath != nil && src.HostPath.Type == nil {
		t := v1.HostPathUnset
		src.HostPath.Type = &t
	}
	if src.ISCSI != nil && src.ISCSI.ISCSIInterface == "" {
		src.ISCSI.ISCSIInterface = "default"
	}
	if src.RBD != nil {
		if src.RBD.RBDPool == "" {
			src.RBD.RBDPool = "rbd"
		}
		if src.RBD.RadosUser == "" {
			src.RBD.RadosUser = "admin"
		}
		if src.RBD.Keyring == "" {
			src.RBD.Keyring = "/etc/ceph/keyring"
		}
	}
	if src.ScaleIO != nil {
		if src.ScaleIO.StorageMode == "" {
			src.ScaleIO.StorageMode = "ThinProvisioned"
		}
		if src.ScaleIO.FSType == "" {
			src.ScaleIO.FSType = "xfs"
		}
	}
	if src.Ephemeral != nil && src.Ephemeral.VolumeClaimTemplate != nil {
		if spec := &src.Ephemeral.VolumeClaimTemplate.Spec; spec.VolumeMode == nil {
			m := v1.PersistentVolumeFilesystem
			spec.VolumeMode = &m
		}
	}
}

// Image references in the grammar of the distribution library: an optional domain, lowercase
// path components, an optional tag and an optional digest.
var podImageRef = regexp.MustCompile(`^` +
	`(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?/)?` +
	`[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*)*` +
	`(?::([\w][\w.-]{0,127}))?` +
	`(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`)

// podDefaultPullPolicy is Always for an image tagged latest or without tag and digest, and
// IfNotPresent otherwise — also for a reference that does not parse, as Kubernetes ignores
// the parse error there and leaves the complaint to the runtime.
func podDefaultPullPolicy(image string) v1.PullPolicy {
	m := podImageRef.FindStringSubmatch(image)
	if m == nil {
		return v1.PullIfNotPresent
	}
	tag, digest := m[1], m[2]
	if tag == "latest" || (tag == "" && digest == "") {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// ValidatePodSpec checks a pod spec with Kubernetes' rules and wording; fldPath is where the
// spec sits ("spec" for a pod, "spec.template.spec" for a Deployment). It expects a spec
// DefaultPodSpec has run on. Rules that apply only to Pod objects (image whitespace,
// hostPort under hostNetwork, ephemeral containers on create) are PodResource's.
func ValidatePodSpec(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	if spec == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return podValidateSpec(spec, fldPath)
}

// ValidatePodTemplateSpec checks a workload's pod template: its labels and annotations and
// its spec. fldPath is where the template sits ("spec.template").
func ValidatePodTemplateSpec(t *v1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	if t == nil {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return podValidateTemplate(t, fldPath)
}
