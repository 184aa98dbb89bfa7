package volumes

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// defaultFileMode is the mode of projected files when the volume names
// none: v1.ConfigMapVolumeSourceDefaultMode, 0644 (420).
const defaultFileMode int32 = v1.ConfigMapVolumeSourceDefaultMode

// modeOr returns *mode, or defaultFileMode when it is nil.
func modeOr(mode *int32) int32 {
	if mode == nil {
		return defaultFileMode
	}
	return *mode
}

// configMapFiles computes a configMap volume's (or projection's) files.
// cm is nil when the ConfigMap does not exist: an optional source then
// yields no files, a required one kubelet's `configmap "x" not found`.
// Without items every key of data and binaryData becomes a file.
func configMapFiles(name string, items []v1.KeyToPath, optional bool, cm *v1.ConfigMap, defaultMode int32) (map[string]fileProjection, error) {
	if cm == nil {
		if optional {
			return map[string]fileProjection{}, nil
		}
		return nil, apierrors.NewNotFound(v1.Resource("configmap"), name)
	}
	return keyFiles(items, optional, defaultMode, func(key string) ([]byte, bool) {
		if s, ok := cm.Data[key]; ok {
			return []byte(s), true
		}
		b, ok := cm.BinaryData[key]
		return b, ok
	}, cmKeys(cm), "configmap references non-existent config key: %s")
}

// secretFiles computes a secret volume's (or projection's) files, with the
// same rules as configMapFiles and kubelet's `secret "x" not found`.
func secretFiles(name string, items []v1.KeyToPath, optional bool, s *v1.Secret, defaultMode int32) (map[string]fileProjection, error) {
	if s == nil {
		if optional {
			return map[string]fileProjection{}, nil
		}
		return nil, apierrors.NewNotFound(v1.Resource("secret"), name)
	}
	keys := make([]string, 0, len(s.Data))
	for k := range s.Data {
		keys = append(keys, k)
	}
	return keyFiles(items, optional, defaultMode, func(key string) ([]byte, bool) {
		b, ok := s.Data[key]
		return b, ok
	}, keys, "references non-existent secret key: %s")
}

// cmKeys lists a ConfigMap's keys, text and binary.
func cmKeys(cm *v1.ConfigMap) []string {
	keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	return keys
}

// keyFiles maps keys to files: all keys under their own names with
// defaultMode, or only the listed items at their paths with their modes.
// A listed key that is missing is skipped when optional and an error
// (missingFormat, kubelet's wording) otherwise.
func keyFiles(items []v1.KeyToPath, optional bool, defaultMode int32, get func(string) ([]byte, bool), all []string, missingFormat string) (map[string]fileProjection, error) {
	out := make(map[string]fileProjection)
	if len(items) == 0 {
		for _, k := range all {
			data, _ := get(k)
			out[k] = fileProjection{Data: data, Mode: defaultMode}
		}
		return out, nil
	}
	for _, it := range items {
		data, ok := get(it.Key)
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf(missingFormat, it.Key)
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = *it.Mode
		}
		out[it.Path] = fileProjection{Data: data, Mode: mode}
	}
	return out, nil
}

// downwardFiles computes a downwardAPI volume's (or projection's) files
// from the pod. allocatable returns the node's allocatable resources,
// which stand in for limits a container does not set (as in kubelet); it
// is called only then.
func downwardFiles(items []v1.DownwardAPIVolumeFile, defaultMode int32, pod *v1.Pod, allocatable func() (v1.ResourceList, error)) (map[string]fileProjection, error) {
	out := make(map[string]fileProjection, len(items))
	for _, it := range items {
		var value string
		var err error
		switch {
		case it.FieldRef != nil:
			value, err = podFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			value, err = resourceFieldValue(pod, it.ResourceFieldRef, allocatable)
		default:
			err = fmt.Errorf("downward API item %q has neither fieldRef nor resourceFieldRef", it.Path)
		}
		if err != nil {
			return nil, err
		}
		mode := defaultMode
		if it.Mode != nil {
			mode = *it.Mode
		}
		out[it.Path] = fileProjection{Data: []byte(value), Mode: mode}
	}
	return out, nil
}

// podFieldValue returns the text of a downward API fieldRef: the metadata
// fields kubelet supports in volumes, labels and annotations as sorted
// key="value" lines, or one of them with the subscript form
// metadata.labels['key'].
func podFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if p, sub, ok := splitSubscript(fieldPath); ok {
		switch p {
		case "metadata.annotations":
			if errs := validation.IsQualifiedName(strings.ToLower(sub)); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Annotations[sub], nil
		case "metadata.labels":
			if errs := validation.IsQualifiedName(sub); len(errs) != 0 {
				return "", fmt.Errorf("invalid key subscript in %s: %s", fieldPath, strings.Join(errs, ";"))
			}
			return pod.Labels[sub], nil
		default:
			return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
		}
	}
	switch fieldPath {
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into its path and key.
func splitSubscript(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	p, rest, ok := strings.Cut(fieldPath, "['")
	if !ok {
		return fieldPath, "", false
	}
	return p, strings.TrimSuffix(rest, "']"), true
}

// formatMap renders labels or annotations as kubelet does: one key="value"
// line per key (value Go-quoted), sorted, no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]string, len(keys))
	for i, k := range keys {
		lines[i] = fmt.Sprintf("%v=%q", k, m[k])
	}
	return strings.Join(lines, "\n")
}

// resourceFieldValue returns a container's request or limit divided by the
// divisor and rounded up, as kubelet writes it; an unset limit is the
// node's allocatable amount.
func resourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector, allocatable func() (v1.ResourceList, error)) (string, error) {
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %s not found", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
	}
	rn := v1.ResourceName(name)
	var q resource.Quantity
	if kind == "limits" {
		l, set := c.Resources.Limits[rn]
		if !set {
			alloc, err := allocatable()
			if err != nil {
				return "", err
			}
			l = alloc[rn]
		}
		q = l
	} else {
		q = c.Resources.Requests[rn]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch {
	case rn == v1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case rn == v1.ResourceMemory || rn == v1.ResourceEphemeralStorage || strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource : %v", ref.Resource)
}

// findContainer returns the pod's container or init container by name.
func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}
