package core

import (
	"fmt"
	"math"
	"path"
	"reflect"
	"regexp"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The error details below are Kubernetes' own (pkg/apis/core/validation), so clients and
// people see the messages they know from a real cluster.
const (
	podFileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"
	podMaxNameservers   = 3
	podMaxSearchPaths   = 32
	podMaxSearchChars   = 2048
	podSysctlMaxLength  = 253
)

var (
	podSupportedProtocols    = sets.New(string(v1.ProtocolTCP), string(v1.ProtocolUDP), string(v1.ProtocolSCTP))
	podSupportedPullPolicies = sets.New(string(v1.PullAlways), string(v1.PullIfNotPresent), string(v1.PullNever))
	podSupportedHTTPSchemes  = sets.New(string(v1.URISchemeHTTP), string(v1.URISchemeHTTPS))
	podSupportedHostPathType = sets.New(string(v1.HostPathUnset), string(v1.HostPathDirectoryOrCreate),
		string(v1.HostPathDirectory), string(v1.HostPathFileOrCreate), string(v1.HostPathFile),
		string(v1.HostPathSocket), string(v1.HostPathCharDev), string(v1.HostPathBlockDev))
	podEnvFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
		"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
	podVolumeFieldPaths     = sets.New("metadata.name", "metadata.namespace", "metadata.labels", "metadata.annotations", "metadata.uid")
	podResourceFieldPaths   = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage")
	podStandardContainerRes = sets.New(string(v1.ResourceCPU), string(v1.ResourceMemory), string(v1.ResourceEphemeralStorage))
	// podSysctlName is a sysctl name, dotted or slashed segments.
	podSysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)
)

func podValidateTemplate(t *v1.PodTemplateSpec, fldPath *field.Path) field.ErrorList {
	allErrs := metavalidation.ValidateLabels(t.Labels, fldPath.Child("labels"))
	allErrs = append(allErrs, apivalidation.ValidateAnnotations(t.Annotations, fldPath.Child("annotations"))...)
	allErrs = append(allErrs, podValidateSpec(&t.Spec, fldPath.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return allErrs
}

func podValidateSpec(spec *v1.PodSpec, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if spec.TerminationGracePeriodSeconds == nil {
		allErrs = append(allErrs, field.Required(fldPath.Child("terminationGracePeriodSeconds"), ""))
	} else if *spec.TerminationGracePeriodSeconds < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds, apivalidation.IsNegativeErrorMsg))
	}
	grace := spec.TerminationGracePeriodSeconds

	vols, vErrs := podValidateVolumes(spec.Volumes, fldPath.Child("volumes"))
	allErrs = append(allErrs, vErrs...)
	allErrs = append(allErrs, podValidateContainers(spec.Containers, vols, grace, spec.RestartPolicy, fldPath.Child("containers"))...)
	allErrs = append(allErrs, podValidateInitContainers(spec.InitContainers, spec.Containers, vols, grace, spec.RestartPolicy, fldPath.Child("initContainers"))...)
	allErrs = append(allErrs, podValidateEphemeralContainers(spec, vols, fldPath.Child("ephemeralContainers"))...)

	allErrs = append(allErrs, podValidateEnum(string(spec.RestartPolicy), fldPath.Child("restartPolicy"),
		[]string{string(v1.RestartPolicyAlways), string(v1.RestartPolicyOnFailure), string(v1.RestartPolicyNever)})...)
	allErrs = append(allErrs, podValidateEnum(string(spec.DNSPolicy), fldPath.Child("dnsPolicy"),
		[]string{string(v1.DNSClusterFirstWithHostNet), string(v1.DNSClusterFirst), string(v1.DNSDefault), string(v1.DNSNone)})...)
	allErrs = append(allErrs, metavalidation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, podValidateSecurityContext(spec, fldPath.Child("securityContext"))...)
	for i, s := range spec.ImagePullSecrets {
		if s.Name == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}
	allErrs = append(allErrs, podValidateDNSConfig(spec.DNSConfig, spec.DNSPolicy, fldPath.Child("dnsConfig"))...)
	for i, g := range spec.ReadinessGates {
		allErrs = append(allErrs, podQualifiedName(string(g.ConditionType), fldPath.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	seenGates := sets.New[string]()
	for i, g := range spec.SchedulingGates {
		allErrs = append(allErrs, podQualifiedName(g.Name, fldPath.Child("schedulingGates").Index(i))...)
		if seenGates.Has(g.Name) {
			allErrs = append(allErrs, field.Duplicate(fldPath.Child("schedulingGates").Index(i), g.Name))
		}
		seenGates.Insert(g.Name)
	}
	if spec.ServiceAccountName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.ServiceAccountName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("serviceAccountName"), spec.ServiceAccountName, msg))
		}
	}
	if spec.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.NodeName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("nodeName"), spec.NodeName, msg))
		}
	}
	if spec.ActiveDeadlineSeconds != nil {
		if v := *spec.ActiveDeadlineSeconds; v < 1 || v > math.MaxInt32 {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), v, validation.InclusiveRangeError(1, math.MaxInt32)))
		}
	}
	if spec.Hostname != "" {
		allErrs = append(allErrs, podDNS1123Label(spec.Hostname, fldPath.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		allErrs = append(allErrs, podDNS1123Label(spec.Subdomain, fldPath.Child("subdomain"))...)
	}
	allErrs = append(allErrs, podValidateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	for i, alias := range spec.HostAliases {
		allErrs = append(allErrs, validation.IsValidIP(fldPath.Child("hostAliases").Index(i).Child("ip"), alias.IP)...)
		for j, h := range alias.Hostnames {
			allErrs = append(allErrs, podDNS1123Subdomain(h, fldPath.Child("hostAliases").Index(i).Child("hostnames").Index(j))...)
		}
	}
	if spec.PriorityClassName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(spec.PriorityClassName, false) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("priorityClassName"), spec.PriorityClassName, msg))
		}
	}
	if spec.PreemptionPolicy != nil {
		allErrs = append(allErrs, podValidateEnum(string(*spec.PreemptionPolicy), fldPath.Child("preemptionPolicy"),
			[]string{string(v1.PreemptLowerPriority), string(v1.PreemptNever)})...)
	}
	if spec.OS != nil {
		allErrs = append(allErrs, podValidateEnum(string(spec.OS.Name), fldPath.Child("os").Child("name"),
			[]string{string(v1.Linux), string(v1.Windows)})...)
	}
	return allErrs
}

// podValidateEnum reports Required for "" and NotSupported for anything outside valid.
func podValidateEnum(value string, fldPath *field.Path, valid []string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	for _, v := range valid {
		if v == value {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(fldPath, value, valid)}
}

func podDNS1123Label(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func podDNS1123Subdomain(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

func podQualifiedName(value string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(value) {
		errs = append(errs, field.Invalid(fldPath, value, msg))
	}
	return errs
}

// podVolumeSourceCount counts the non-nil sources of a volume (all VolumeSource fields are
// pointers, one per volume type).
func podVolumeSourceCount(src *v1.VolumeSource) int {
	n := 0
	v := reflect.ValueOf(src).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}

// podValidateVolumes checks names and sources and returns the valid volumes by name, for
// the volumeMounts check.
func podValidateVolumes(volumes []v1.Volume, fldPath *field.Path) (map[string]v1.VolumeSource, field.ErrorList) {
	allErrs := field.ErrorList{}
	names := sets.New[string]()
	vols := map[string]v1.VolumeSource{}
	for i, vol := range volumes {
		idxPath := fldPath.Index(i)
		namePath := idxPath.Child("name")
		el := podValidateVolumeSource(&vol.VolumeSource, idxPath)
		if vol.Name == "" {
			el = append(el, field.Required(namePath, ""))
		} else {
			el = append(el, podDNS1123Label(vol.Name, namePath)...)
		}
		if names.Has(vol.Name) {
			el = append(el, field.Duplicate(namePath, vol.Name))
		}
		if len(el) == 0 {
			names.Insert(vol.Name)
			vols[vol.Name] = vol.VolumeSource
		} else {
			allErrs = append(allErrs, el...)
		}
	}
	return vols, allErrs
}

func podValidateVolumeSource(src *v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	num := 0
	v := reflect.ValueOf(src).Elem()
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Pointer || f.IsNil() {
			continue
		}
		if num > 0 {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			allErrs = append(allErrs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
			continue
		}
		num++
	}
	if num == 0 {
		return append(allErrs, field.Required(fldPath, "must specify a volume type"))
	}
	switch {
	case src.EmptyDir != nil:
		if src.EmptyDir.SizeLimit != nil && src.EmptyDir.SizeLimit.Sign() < 0 {
			allErrs = append(allErrs, field.Forbidden(fldPath.Child("emptyDir").Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case src.HostPath != nil:
		p := fldPath.Child("hostPath")
		if src.HostPath.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
			break
		}
		allErrs = append(allErrs, podPathNoBacksteps(src.HostPath.Path, p.Child("path"))...)
		if src.HostPath.Type != nil && !podSupportedHostPathType.Has(string(*src.HostPath.Type)) {
			allErrs = append(allErrs, field.NotSupported(p.Child("type"), *src.HostPath.Type, sets.List(podSupportedHostPathType)))
		}
	case src.Secret != nil:
		p := fldPath.Child("secret")
		if src.Secret.SecretName == "" {
			allErrs = append(allErrs, field.Required(p.Child("secretName"), ""))
		}
		allErrs = append(allErrs, podValidateMode(src.Secret.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.Secret.Items {
			allErrs = append(allErrs, podValidateKeyToPath(&src.Secret.Items[i], p.Child("items").Index(i))...)
		}
	case src.ConfigMap != nil:
		p := fldPath.Child("configMap")
		if src.ConfigMap.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		allErrs = append(allErrs, podValidateMode(src.ConfigMap.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.ConfigMap.Items {
			allErrs = append(allErrs, podValidateKeyToPath(&src.ConfigMap.Items[i], p.Child("items").Index(i))...)
		}
	case src.PersistentVolumeClaim != nil:
		if src.PersistentVolumeClaim.ClaimName == "" {
			allErrs = append(allErrs, field.Required(fldPath.Child("persistentVolumeClaim").Child("claimName"), ""))
		}
	case src.NFS != nil:
		p := fldPath.Child("nfs")
		if src.NFS.Server == "" {
			allErrs = append(allErrs, field.Required(p.Child("server"), ""))
		}
		if src.NFS.Path == "" {
			allErrs = append(allErrs, field.Required(p.Child("path"), ""))
		}
		if !path.IsAbs(src.NFS.Path) {
			allErrs = append(allErrs, field.Invalid(p.Child("path"), src.NFS.Path, "must be an absolute path"))
		}
	case src.DownwardAPI != nil:
		p := fldPath.Child("downwardAPI")
		allErrs = append(allErrs, podValidateMode(src.DownwardAPI.DefaultMode, p.Child("defaultMode"))...)
		for i := range src.DownwardAPI.Items {
			allErrs = append(allErrs, podValidateDownwardAPIFile(&src.DownwardAPI.Items[i], p)...)
		}
	case src.Projected != nil:
		allErrs = append(allErrs, podValidateProjected(src.Projected, fldPath.Child("projected"))...)
	case src.Image != nil:
		allErrs = append(allErrs, podValidateImageVolume(src.Image, fldPath.Child("image"))...)
	}
	return allErrs
}

func podValidateMode(mode *int32, fldPath *field.Path) field.ErrorList {
	if mode != nil && (*mode > 0777 || *mode < 0) {
		return field.ErrorList{field.Invalid(fldPath, *mode, podFileModeErrorMsg)}
	}
	return nil
}

func podPathNoBacksteps(p string, fldPath *field.Path) field.ErrorList {
	for _, item := range strings.Split(p, "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(fldPath, p, "must not contain '..'")}
		}
	}
	return nil
}

func podLocalDescendingPath(p string, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if path.IsAbs(p) {
		allErrs = append(allErrs, field.Invalid(fldPath, p, "must be a relative path"))
	}
	return append(allErrs, podPathNoBacksteps(p, fldPath)...)
}

func podLocalNonReservedPath(p string, fldPath *field.Path) field.ErrorList {
	allErrs := podLocalDescendingPath(p, fldPath)
	if strings.HasPrefix(p, "..") {
		allErrs = append(allErrs, field.Invalid(fldPath, p, "must not start with '..'"))
	}
	return allErrs
}

func podValidateKeyToPath(kp *v1.KeyToPath, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if kp.Key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	}
	if kp.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, podLocalNonReservedPath(kp.Path, fldPath.Child("path"))...)
	return append(allErrs, podValidateMode(kp.Mode, fldPath.Child("mode"))...)
}

func podValidateDownwardAPIFile(file *v1.DownwardAPIVolumeFile, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if file.Path == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("path"), ""))
	}
	allErrs = append(allErrs, podLocalNonReservedPath(file.Path, fldPath.Child("path"))...)
	switch {
	case file.FieldRef != nil:
		allErrs = append(allErrs, podValidateFieldSelector(file.FieldRef, podVolumeFieldPaths, fldPath.Child("fieldRef"))...)
		if file.ResourceFieldRef != nil {
			allErrs = append(allErrs, field.Invalid(fldPath, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case file.ResourceFieldRef != nil:
		allErrs = append(allErrs, podValidateResourceFieldSelector(file.ResourceFieldRef, fldPath.Child("resourceFieldRef"), true)...)
	default:
		allErrs = append(allErrs, field.Required(fldPath, "one of fieldRef and resourceFieldRef is required"))
	}
	return append(allErrs, podValidateMode(file.Mode, fldPath.Child("mode"))...)
}

func podValidateProjected(p *v1.ProjectedVolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := podValidateMode(p.DefaultMode, fldPath.Child("defaultMode"))
	seenPaths := map[string]bool{}
	for i, src := range p.Sources {
		srcPath := fldPath.Child("sources").Index(i)
		num := 0
		if src.Secret != nil {
			num++
			if src.Secret.Name == "" {
				allErrs = append(allErrs, field.Required(srcPath.Child("secret").Child("name"), ""))
			}
			for j := range src.Secret.Items {
				allErrs = append(allErrs, podValidateKeyToPath(&src.Secret.Items[j], srcPath.Child("secret").Child("items").Index(j))...)
			}
		}
		if src.ConfigMap != nil {
			num++
			if src.ConfigMap.Name == "" {
				allErrs = append(allErrs, field.Required(srcPath.Child("configMap").Child("name"), ""))
			}
			for j := range src.ConfigMap.Items {
				allErrs = append(allErrs, podValidateKeyToPath(&src.ConfigMap.Items[j], srcPath.Child("configMap").Child("items").Index(j))...)
			}
		}
		if src.DownwardAPI != nil {
			num++
			for j := range src.DownwardAPI.Items {
				allErrs = append(allErrs, podValidateDownwardAPIFile(&src.DownwardAPI.Items[j], srcPath.Child("downwardAPI"))...)
			}
		}
		if src.ServiceAccountToken != nil {
			num++
			tp := srcPath.Child("serviceAccountToken")
			if src.ServiceAccountToken.ExpirationSeconds != nil {
				if e := *src.ServiceAccountToken.ExpirationSeconds; e < 10*60 {
					allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), e, "may not specify a duration less than 10 minutes"))
				} else if e > 1<<32 {
					allErrs = append(allErrs, field.Invalid(tp.Child("expirationSeconds"), e, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			if src.ServiceAccountToken.Path == "" {
				allErrs = append(allErrs, field.Required(tp.Child("path"), ""))
			}
		}
		if src.ClusterTrustBundle != nil {
			num++
			allErrs = append(allErrs, podValidateClusterTrustBundle(src.ClusterTrustBundle, srcPath.Child("clusterTrustBundle"), fldPath, seenPaths)...)
		}
		if src.PodCertificate != nil {
			num++
			allErrs = append(allErrs, podValidatePodCertificate(src.PodCertificate, srcPath.Child("podCertificate"), fldPath, seenPaths)...)
		}
		if num > 1 {
			allErrs = append(allErrs, field.Forbidden(srcPath, "may not specify more than 1 volume type per source"))
		}
	}
	return allErrs
}

// podSplitSubscript splits "metadata.labels['key']" into "metadata.labels" and "key".
func podSplitSubscript(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

// podDownwardAPILabelError is the v1 conversion of a downward API field label.
func podDownwardAPILabelError(version, label string) error {
	if version != "v1" {
		return fmt.Errorf("unsupported pod version: %s", version)
	}
	if p, _, ok := podSplitSubscript(label); ok {
		if p == "metadata.annotations" || p == "metadata.labels" {
			return nil
		}
		return fmt.Errorf("field label not supported: %s", label)
	}
	switch label {
	case "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
		"status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return nil
	}
	return fmt.Errorf("field label not supported: %s", label)
}

func podValidateFieldSelector(fs *v1.ObjectFieldSelector, expressions sets.Set[string], fldPath *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(fldPath.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(fldPath.Child("fieldPath"), "")}
	}
	if err := podDownwardAPILabelError(fs.APIVersion, fs.FieldPath); err != nil {
		return field.ErrorList{field.Invalid(fldPath.Child("fieldPath"), fs.FieldPath, fmt.Sprintf("error converting fieldPath: %v", err))}
	}
	p, subscript, ok := podSplitSubscript(fs.FieldPath)
	if ok {
		switch p {
		case "metadata.annotations":
			return podQualifiedName(strings.ToLower(subscript), fldPath)
		case "metadata.labels":
			return podQualifiedName(subscript, fldPath)
		}
		return field.ErrorList{field.Invalid(fldPath, p, "does not support subscript")}
	}
	if !expressions.Has(p) {
		return field.ErrorList{field.NotSupported(fldPath.Child("fieldPath"), p, sets.List(expressions))}
	}
	return nil
}

func podValidateResourceFieldSelector(fs *v1.ResourceFieldSelector, fldPath *field.Path, volume bool) field.ErrorList {
	switch {
	case volume && fs.ContainerName == "":
		return field.ErrorList{field.Required(fldPath.Child("containerName"), "")}
	case fs.Resource == "":
		return field.ErrorList{field.Required(fldPath.Child("resource"), "")}
	case !podResourceFieldPaths.Has(fs.Resource) &&
		!strings.HasPrefix(fs.Resource, "requests.hugepages-") && !strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		return field.ErrorList{field.NotSupported(fldPath.Child("resource"), fs.Resource, sets.List(podResourceFieldPaths))}
	}
	return nil
}

func podValidateContainers(containers []v1.Container, vols map[string]v1.VolumeSource, grace *int64, restart v1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	allErrs := field.ErrorList{}
	names := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, podValidateContainerCommon(c, vols, restart, p)...)
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		allErrs = append(allErrs, podValidateLifecycleAndProbes(c, grace, p)...)
		if c.RestartPolicy != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(allErrs, podHostPortConflicts(containers, fldPath)...)
}

func podValidateInitContainers(inits, regular []v1.Container, vols map[string]v1.VolumeSource, grace *int64, restart v1.RestartPolicy, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range inits {
		c := &inits[i]
		p := fldPath.Index(i)
		allErrs = append(allErrs, podValidateContainerCommon(c, vols, restart, p)...)
		sidecar := false
		if c.RestartPolicy != nil {
			sidecar = *c.RestartPolicy == v1.ContainerRestartPolicyAlways
			if !sidecar {
				allErrs = append(allErrs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{string(v1.ContainerRestartPolicyAlways)}))
			}
		}
		if names.Has(c.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// Init containers run one by one, so their host ports only conflict within one.
		allErrs = append(allErrs, podHostPortConflicts([]v1.Container{*c}, fldPath)...)
		if sidecar {
			allErrs = append(allErrs, podValidateLifecycleAndProbes(c, grace, p)...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("startupProbe"), msg))
		}
	}
	return allErrs
}

// podEphemeralAllowedFields are the json names of the EphemeralContainerCommon fields
// an ephemeral container may set. Kubernetes keeps an allow list, so that a field added
// to containers later is refused until someone decides it makes sense for a debugging
// container; ports, probes, lifecycle, resources and restart policies do not.
var podEphemeralAllowedFields = sets.New("name", "image", "command", "args", "workingDir", "envFrom", "env",
	"volumeMounts", "volumeDevices", "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy",
	"securityContext", "stdin", "stdinOnce", "tty")

// podEphemeralForbidden is the detail of every field an ephemeral container may not set.
const podEphemeralForbidden = "cannot be set for an Ephemeral Container"

// podValidateEphemeralContainers checks spec.ephemeralContainers as Kubernetes does for
// pods and templates alike: the rules of every container, an image without surrounding
// whitespace, a name unique among all the pod's containers, a targetContainerName naming
// one of its containers or init containers, nothing set outside the allow list, and no
// subPath or subPathExpr mounts.
func podValidateEphemeralContainers(spec *v1.PodSpec, vols map[string]v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if len(spec.EphemeralContainers) == 0 {
		return allErrs
	}
	targets := sets.New[string]()
	for _, c := range spec.Containers {
		targets.Insert(c.Name)
	}
	for _, c := range spec.InitContainers {
		targets.Insert(c.Name)
	}
	names := targets.Clone()
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		p := fldPath.Index(i)
		c := v1.Container(ec.EphemeralContainerCommon)
		allErrs = append(allErrs, podValidateContainerCommon(&c, vols, spec.RestartPolicy, p)...)
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			allErrs = append(allErrs, field.Invalid(p.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		if names.Has(ec.Name) {
			allErrs = append(allErrs, field.Duplicate(p.Child("name"), ec.Name))
		}
		names.Insert(ec.Name)
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			allErrs = append(allErrs, field.NotFound(p.Child("targetContainerName"), ec.TargetContainerName))
		}
		allErrs = append(allErrs, podEphemeralSetFields(&ec.EphemeralContainerCommon, p)...)
		for j, m := range ec.VolumeMounts {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPath"), podEphemeralForbidden))
			}
			if m.SubPathExpr != "" {
				allErrs = append(allErrs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("subPathExpr"), podEphemeralForbidden))
			}
		}
	}
	return allErrs
}

// podEphemeralSetFields refuses, in declaration order, every field of ec that is set
// (not its zero value) and not in podEphemeralAllowedFields.
func podEphemeralSetFields(ec *v1.EphemeralContainerCommon, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	v := reflect.ValueOf(ec).Elem()
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if podEphemeralAllowedFields.Has(name) || v.Field(i).IsZero() {
			continue
		}
		allErrs = append(allErrs, field.Forbidden(p.Child(name), podEphemeralForbidden))
	}
	return allErrs
}

func podValidateContainerCommon(c *v1.Container, vols map[string]v1.VolumeSource, restart v1.RestartPolicy, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if c.Name == "" {
		allErrs = append(allErrs, field.Required(p.Child("name"), ""))
	} else {
		allErrs = append(allErrs, podDNS1123Label(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), ""))
	}
	allErrs = append(allErrs, podValidateEnum(string(c.TerminationMessagePolicy), p.Child("terminationMessagePolicy"),
		[]string{string(v1.TerminationMessageReadFile), string(v1.TerminationMessageFallbackToLogsOnError)})...)
	allErrs = append(allErrs, podValidatePorts(c.Ports, p.Child("ports"))...)
	allErrs = append(allErrs, podValidateEnv(c.Env, p.Child("env"))...)
	allErrs = append(allErrs, podValidateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	allErrs = append(allErrs, podValidateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	switch {
	case c.ImagePullPolicy == "":
		allErrs = append(allErrs, field.Required(p.Child("imagePullPolicy"), ""))
	case !podSupportedPullPolicies.Has(string(c.ImagePullPolicy)):
		allErrs = append(allErrs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(podSupportedPullPolicies)))
	}
	allErrs = append(allErrs, podValidateResources(&c.Resources, p.Child("resources"))...)
	for _, rp := range c.ResizePolicy {
		rpPath := p.Child("resizePolicy")
		allErrs = append(allErrs, podValidateEnum(string(rp.ResourceName), rpPath, []string{string(v1.ResourceCPU), string(v1.ResourceMemory)})...)
		allErrs = append(allErrs, podValidateEnum(string(rp.RestartPolicy), rpPath, []string{string(v1.NotRequired), string(v1.RestartContainer)})...)
		if restart == v1.RestartPolicyNever && rp.RestartPolicy != v1.NotRequired {
			allErrs = append(allErrs, field.Invalid(rpPath, rp.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return append(allErrs, podValidateContainerSecurityContext(c.SecurityContext, p.Child("securityContext"))...)
}

func podValidatePorts(ports []v1.ContainerPort, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	names := sets.New[string]()
	for i, port := range ports {
		p := fldPath.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					allErrs = append(allErrs, field.Invalid(p.Child("name"), port.Name, msg))
				}
			} else if names.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(p.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			allErrs = append(allErrs, field.Required(p.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("containerPort"), port.ContainerPort, msg))
			}
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(p.Child("hostPort"), port.HostPort, msg))
			}
		}
		switch {
		case port.Protocol == "":
			allErrs = append(allErrs, field.Required(p.Child("protocol"), ""))
		case !podSupportedProtocols.Has(string(port.Protocol)):
			allErrs = append(allErrs, field.NotSupported(p.Child("protocol"), port.Protocol, sets.List(podSupportedProtocols)))
		}
	}
	return allErrs
}

func podHostPortConflicts(containers []v1.Container, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	seen := sets.New[string]()
	for ci, c := range containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				allErrs = append(allErrs, field.Duplicate(fldPath.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return allErrs
}

// podValidateEnv uses the relaxed variable-name rule (any printable ASCII but '='), which
// Kubernetes enables by default since the RelaxedEnvironmentVariableValidation gate.
func podValidateEnv(vars []v1.EnvVar, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for i, ev := range vars {
		p := fldPath.Index(i)
		if ev.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				allErrs = append(allErrs, field.Invalid(p.Child("name"), ev.Name, msg))
			}
		}
		allErrs = append(allErrs, podValidateEnvValueFrom(ev, p.Child("valueFrom"))...)
	}
	return allErrs
}

func podValidateEnvValueFrom(ev v1.EnvVar, fldPath *field.Path) field.ErrorList {
	if ev.ValueFrom == nil {
		return nil
	}
	allErrs := field.ErrorList{}
	num := 0
	if ev.ValueFrom.FieldRef != nil {
		num++
		allErrs = append(allErrs, podValidateFieldSelector(ev.ValueFrom.FieldRef, podEnvFieldPaths, fldPath.Child("fieldRef"))...)
	}
	if ev.ValueFrom.ResourceFieldRef != nil {
		num++
		allErrs = append(allErrs, podValidateResourceFieldSelector(ev.ValueFrom.ResourceFieldRef, fldPath.Child("resourceFieldRef"), false)...)
	}
	if ref := ev.ValueFrom.ConfigMapKeyRef; ref != nil {
		num++
		allErrs = append(allErrs, podValidateKeySelector(ref.Name, ref.Key, fldPath.Child("configMapKeyRef"))...)
	}
	if ref := ev.ValueFrom.SecretKeyRef; ref != nil {
		num++
		allErrs = append(allErrs, podValidateKeySelector(ref.Name, ref.Key, fldPath.Child("secretKeyRef"))...)
	}
	if ev.ValueFrom.FileKeyRef != nil {
		num++
	}
	switch {
	case num == 0:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not be specified when `value` is not empty"))
	case num > 1:
		allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
	}
	return allErrs
}

func podValidateKeySelector(name, key string, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	if key == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			allErrs = append(allErrs, field.Invalid(fldPath.Child("key"), key, msg))
		}
	}
	return allErrs
}

func podValidateEnvFrom(sources []v1.EnvFromSource, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for i, ev := range sources {
		p := fldPath.Index(i)
		if ev.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Prefix) {
				allErrs = append(allErrs, field.Invalid(p.Child("prefix"), ev.Prefix, msg))
			}
		}
		num := 0
		if ev.ConfigMapRef != nil {
			num++
			allErrs = append(allErrs, podValidateRefName(ev.ConfigMapRef.Name, p.Child("configMapRef"))...)
		}
		if ev.SecretRef != nil {
			num++
			allErrs = append(allErrs, podValidateRefName(ev.SecretRef.Name, p.Child("secretRef"))...)
		}
		switch {
		case num == 0:
			allErrs = append(allErrs, field.Invalid(fldPath, "", "must specify one of: `configMapRef` or `secretRef`"))
		case num > 1:
			allErrs = append(allErrs, field.Invalid(fldPath, "", "may not have more than one field specified at a time"))
		}
	}
	return allErrs
}

func podValidateRefName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath.Child("name"), "")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	return errs
}

func podValidateVolumeMounts(mounts []v1.VolumeMount, vols map[string]v1.VolumeSource, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	mountpoints := sets.New[string]()
	for i, m := range mounts {
		p := fldPath.Index(i)
		if m.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			allErrs = append(allErrs, field.NotFound(p.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			allErrs = append(allErrs, field.Required(p.Child("mountPath"), ""))
		}
		if mountpoints.Has(m.MountPath) {
			allErrs = append(allErrs, field.Invalid(p.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountpoints.Insert(m.MountPath)
		if m.SubPath != "" {
			allErrs = append(allErrs, podLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			allErrs = append(allErrs, podLocalDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		allErrs = append(allErrs, podValidateImageVolumeMount(&mounts[i], vols, p)...)
	}
	return allErrs
}

// podIsNativeResource reports a resource name without a domain or in kubernetes.io.
func podIsNativeResource(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix)
}

// podOvercommitAllowed is false for hugepages and extended resources, whose requests
// must equal their limits.
func podOvercommitAllowed(name string) bool {
	return podIsNativeResource(name) && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix)
}

func podValidateResourceName(name string, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for _, msg := range content.IsLabelKey(name) {
		allErrs = append(allErrs, field.Invalid(fldPath, name, msg))
	}
	if len(allErrs) != 0 {
		return allErrs
	}
	if !strings.Contains(name, "/") {
		if !podStandardContainerRes.Has(name) && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			allErrs = append(allErrs, field.Invalid(fldPath, name, "must be a standard resource for containers"))
		}
	} else if !podIsNativeResource(name) && len(content.IsLabelKey("requests."+name)) != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, name, "doesn't follow extended resource name standard"))
	}
	return allErrs
}

func podValidateQuantity(name string, q resource.Quantity, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if q.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	// Extended resources are counted in whole units.
	if !podIsNativeResource(name) && q.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, q.String(), "must be an integer"))
	}
	return allErrs
}

func podSortedResourceNames(list v1.ResourceList) []string {
	names := make([]string, 0, len(list))
	for n := range list {
		names = append(names, string(n))
	}
	sort.Strings(names)
	return names
}

func podValidateResources(r *v1.ResourceRequirements, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	limPath, reqPath := fldPath.Child("limits"), fldPath.Child("requests")
	for _, name := range podSortedResourceNames(r.Limits) {
		p := limPath.Key(name)
		allErrs = append(allErrs, podValidateResourceName(name, p)...)
		allErrs = append(allErrs, podValidateQuantity(name, r.Limits[v1.ResourceName(name)], p)...)
	}
	for _, name := range podSortedResourceNames(r.Requests) {
		p := reqPath.Key(name)
		q := r.Requests[v1.ResourceName(name)]
		allErrs = append(allErrs, podValidateResourceName(name, p)...)
		allErrs = append(allErrs, podValidateQuantity(name, q, p)...)
		limit, ok := r.Limits[v1.ResourceName(name)]
		switch {
		case ok && q.Cmp(limit) != 0 && !podOvercommitAllowed(name):
			allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case ok && q.Cmp(limit) > 0:
			allErrs = append(allErrs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !ok && !podOvercommitAllowed(name):
			allErrs = append(allErrs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	return allErrs
}

func podValidateLifecycleAndProbes(c *v1.Container, grace *int64, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if c.Lifecycle != nil {
		if h := c.Lifecycle.PostStart; h != nil {
			allErrs = append(allErrs, podValidateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, grace, p.Child("lifecycle").Child("postStart"))...)
		}
		if h := c.Lifecycle.PreStop; h != nil {
			allErrs = append(allErrs, podValidateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, grace, p.Child("lifecycle").Child("preStop"))...)
		}
	}
	if pr := c.LivenessProbe; pr != nil {
		allErrs = append(allErrs, podValidateProbe(pr, grace, p.Child("livenessProbe"))...)
		if pr.SuccessThreshold != 1 {
			allErrs = append(allErrs, field.Invalid(p.Child("livenessProbe").Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
		}
	}
	if pr := c.ReadinessProbe; pr != nil {
		allErrs = append(allErrs, podValidateProbe(pr, grace, p.Child("readinessProbe"))...)
		if pr.TerminationGracePeriodSeconds != nil {
			allErrs = append(allErrs, field.Invalid(p.Child("readinessProbe").Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	if pr := c.StartupProbe; pr != nil {
		allErrs = append(allErrs, podValidateProbe(pr, grace, p.Child("startupProbe"))...)
		if pr.SuccessThreshold != 1 {
			allErrs = append(allErrs, field.Invalid(p.Child("startupProbe").Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
		}
	}
	return allErrs
}

func podValidateProbe(pr *v1.Probe, grace *int64, p *field.Path) field.ErrorList {
	allErrs := podValidateHandler(pr.Exec, pr.HTTPGet, pr.TCPSocket, pr.GRPC, nil, grace, p)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(pr.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(pr.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(pr.PeriodSeconds), p.Child("periodSeconds"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(pr.SuccessThreshold), p.Child("successThreshold"))...)
	allErrs = append(allErrs, apivalidation.ValidateNonnegativeField(int64(pr.FailureThreshold), p.Child("failureThreshold"))...)
	if pr.TerminationGracePeriodSeconds != nil && *pr.TerminationGracePeriodSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *pr.TerminationGracePeriodSeconds, "must be greater than 0"))
	}
	return allErrs
}

// podValidateHandler requires exactly one handler, in Kubernetes' order of precedence.
func podValidateHandler(exec *v1.ExecAction, get *v1.HTTPGetAction, tcp *v1.TCPSocketAction, grpc *v1.GRPCAction, sleep *v1.SleepAction, grace *int64, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	num := 0
	one := func(set bool, name string, check func() field.ErrorList) {
		if !set {
			return
		}
		if num > 0 {
			allErrs = append(allErrs, field.Forbidden(p.Child(name), "may not specify more than 1 handler type"))
			return
		}
		num++
		allErrs = append(allErrs, check()...)
	}
	one(exec != nil, "exec", func() field.ErrorList {
		if len(exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("exec").Child("command"), "")}
		}
		return nil
	})
	one(get != nil, "httpGet", func() field.ErrorList {
		hp := p.Child("httpGet")
		errs := field.ErrorList{}
		if get.Path == "" {
			errs = append(errs, field.Required(hp.Child("path"), ""))
		}
		errs = append(errs, podValidatePortNumOrName(get.Port, hp.Child("port"))...)
		if !podSupportedHTTPSchemes.Has(string(get.Scheme)) {
			errs = append(errs, field.NotSupported(hp.Child("scheme"), get.Scheme, sets.List(podSupportedHTTPSchemes)))
		}
		for _, h := range get.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				errs = append(errs, field.Invalid(hp.Child("httpHeaders"), h.Name, msg))
			}
		}
		return errs
	})
	one(tcp != nil, "tcpSocket", func() field.ErrorList {
		return podValidatePortNumOrName(tcp.Port, p.Child("tcpSocket").Child("port"))
	})
	one(grpc != nil, "grpc", func() field.ErrorList {
		return podValidatePortNumOrName(intstr.FromInt32(grpc.Port), p.Child("grpc").Child("port"))
	})
	one(sleep != nil, "sleep", func() field.ErrorList {
		if grace != nil && (sleep.Seconds < 0 || sleep.Seconds > *grace) {
			return field.ErrorList{field.Invalid(p.Child("sleep"), sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *grace))}
		}
		return nil
	})
	if num == 0 {
		allErrs = append(allErrs, field.Required(p, "must specify a handler type"))
	}
	return allErrs
}

func podValidatePortNumOrName(port intstr.IntOrString, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			allErrs = append(allErrs, field.Invalid(fldPath, port.StrVal, msg))
		}
	default:
		allErrs = append(allErrs, field.InternalError(fldPath, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return allErrs
}

func podValidateContainerSecurityContext(sc *v1.SecurityContext, p *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	allErrs := field.ErrorList{}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			allErrs = append(allErrs, field.Invalid(p.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			allErrs = append(allErrs, field.Invalid(p.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	if sc.ProcMount != nil {
		allErrs = append(allErrs, podValidateEnum(string(*sc.ProcMount), p.Child("procMount"),
			[]string{string(v1.DefaultProcMount), string(v1.UnmaskedProcMount)})...)
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			allErrs = append(allErrs, field.Invalid(p, sc, "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if string(c) == "CAP_SYS_ADMIN" {
					allErrs = append(allErrs, field.Invalid(p, sc, "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
	return allErrs
}

func podValidateSecurityContext(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	sc := spec.SecurityContext
	if sc == nil {
		return allErrs
	}
	if sc.FSGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.FSGroup) {
			allErrs = append(allErrs, field.Invalid(p.Child("fsGroup"), *sc.FSGroup, msg))
		}
	}
	if sc.RunAsUser != nil {
		for _, msg := range validation.IsValidUserID(*sc.RunAsUser) {
			allErrs = append(allErrs, field.Invalid(p.Child("runAsUser"), *sc.RunAsUser, msg))
		}
	}
	if sc.RunAsGroup != nil {
		for _, msg := range validation.IsValidGroupID(*sc.RunAsGroup) {
			allErrs = append(allErrs, field.Invalid(p.Child("runAsGroup"), *sc.RunAsGroup, msg))
		}
	}
	for i, gid := range sc.SupplementalGroups {
		for _, msg := range validation.IsValidGroupID(gid) {
			allErrs = append(allErrs, field.Invalid(p.Child("supplementalGroups").Index(i), gid, msg))
		}
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		allErrs = append(allErrs, field.Invalid(p.Child("shareProcessNamespace"), *spec.ShareProcessNamespace, "ShareProcessNamespace and HostPID cannot both be enabled"))
	}
	names := sets.New[string]()
	for i, s := range sc.Sysctls {
		np := p.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			allErrs = append(allErrs, field.Required(np, ""))
		case len(s.Name) > podSysctlMaxLength || !podSysctlName.MatchString(s.Name):
			allErrs = append(allErrs, field.Invalid(np, s.Name, fmt.Sprintf("must have at most %d characters and match regex %s", podSysctlMaxLength, podSysctlName)))
		case names.Has(s.Name):
			allErrs = append(allErrs, field.Duplicate(np, s.Name))
		}
		names.Insert(s.Name)
	}
	if sc.FSGroupChangePolicy != nil {
		valid := []string{string(v1.FSGroupChangeAlways), string(v1.FSGroupChangeOnRootMismatch)}
		if !sets.New(valid...).Has(string(*sc.FSGroupChangePolicy)) {
			allErrs = append(allErrs, field.NotSupported(p.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy, valid))
		}
	}
	return allErrs
}

func podValidateDNSConfig(cfg *v1.PodDNSConfig, policy v1.DNSPolicy, p *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	if policy == v1.DNSNone {
		if cfg == nil {
			return append(allErrs, field.Required(p, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", v1.DNSNone)))
		}
		if len(cfg.Nameservers) == 0 {
			return append(allErrs, field.Required(p.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", v1.DNSNone)))
		}
	}
	if cfg == nil {
		return allErrs
	}
	if len(cfg.Nameservers) > podMaxNameservers {
		allErrs = append(allErrs, field.Invalid(p.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", podMaxNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		allErrs = append(allErrs, validation.IsValidIP(p.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > podMaxSearchPaths {
		allErrs = append(allErrs, field.Invalid(p.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", podMaxSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > podMaxSearchChars {
		allErrs = append(allErrs, field.Invalid(p.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", podMaxSearchChars)))
	}
	// Relaxed search validation (Kubernetes' default since RelaxedDNSSearchValidation):
	// "." and underscores are allowed.
	for i, search := range cfg.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			allErrs = append(allErrs, field.Invalid(p.Child("searches").Index(i), search, msg))
		}
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			allErrs = append(allErrs, field.Required(p.Child("options").Index(i), "must not be empty"))
		}
	}
	return allErrs
}

func podValidateTaintEffect(effect v1.TaintEffect, allowEmpty bool, p *field.Path) field.ErrorList {
	if !allowEmpty && effect == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	switch effect {
	case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, effect, []string{
		string(v1.TaintEffectNoSchedule), string(v1.TaintEffectPreferNoSchedule), string(v1.TaintEffectNoExecute)})}
}

func podValidateTolerations(tolerations []v1.Toleration, fldPath *field.Path) field.ErrorList {
	allErrs := field.ErrorList{}
	for i, t := range tolerations {
		p := fldPath.Index(i)
		if t.Key != "" {
			allErrs = append(allErrs, metavalidation.ValidateLabelName(t.Key, p.Child("key"))...)
		}
		if t.Key == "" && t.Operator != v1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			if errs := content.IsLabelValue(t.Value); len(errs) != 0 {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, strings.Join(errs, ";")))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				allErrs = append(allErrs, field.Invalid(p.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(p.Child("operator"), t.Operator,
				[]string{string(v1.TolerationOpEqual), string(v1.TolerationOpExists)}))
		}
		if t.Effect != "" {
			allErrs = append(allErrs, podValidateTaintEffect(t.Effect, true, p.Child("effect"))...)
		}
	}
	return allErrs
}
