package runtime

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Lookup reads the data of a ConfigMap or Secret (kind "ConfigMap" or "Secret") for a
// container's environment; Secret values are given decoded. found is false when the object
// does not exist; err is for any other failure.
type Lookup func(ctx context.Context, kind, namespace, name string) (data map[string]string, found bool, err error)

// envVar is one variable of a container's environment.
type envVar struct{ name, value string }

// envList keeps variables in first-definition order; a later definition replaces the
// value in place, as kubelet's environment does.
type envList struct {
	vars  []envVar
	index map[string]int
}

func (l *envList) set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, envVar{name, value})
}

func (l *envList) lookup(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].value, true
}

// environ returns the list as NAME=value strings.
func (l *envList) environ() []string {
	out := make([]string, len(l.vars))
	for i, v := range l.vars {
		out[i] = v.name + "=" + v.value
	}
	return out
}

// podEnv describes the pod facts a container's environment may refer to.
type podEnv struct {
	pod      *v1.Pod
	podIPs   []string
	hostIPs  []string
	hostname string
	// nodeCPU and nodeMemory stand in for the node's allocatable resources, which a
	// resourceFieldRef on an unset limit reports.
	nodeCPU    resource.Quantity
	nodeMemory resource.Quantity
	// services are the variables kubelet derives from Services (serviceEnv).
	services []envVar
}

// configError is a failure to build a container's configuration (kubelet's
// CreateContainerConfigError): the container waits with its message.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// containerEnv builds the environment of container c as kubelet does: HOSTNAME first,
// then every envFrom source in order (every key, prefixed), then env in
// order, where values expand $(VAR) references to variables defined before them. PATH
// is the image's unless the container sets one (ocispec puts the image's environment
// under this one). A missing ConfigMap, Secret or key that is not optional is a
// *configError.
func containerEnv(ctx context.Context, pe podEnv, c *v1.Container, lookup Lookup) ([]string, error) {
	var l envList
	l.set("HOSTNAME", pe.hostname)
	for _, v := range pe.services {
		l.set(v.name, v.value)
	}
	ns := ""
	if pe.pod != nil {
		ns = pe.pod.Namespace
	}
	for _, src := range c.EnvFrom {
		kind, name, optional := "", "", false
		switch {
		case src.ConfigMapRef != nil:
			kind, name, optional = "ConfigMap", src.ConfigMapRef.Name, deref(src.ConfigMapRef.Optional)
		case src.SecretRef != nil:
			kind, name, optional = "Secret", src.SecretRef.Name, deref(src.SecretRef.Optional)
		default:
			continue
		}
		data, found, err := fetch(ctx, lookup, kind, ns, name)
		if err != nil {
			return nil, err
		}
		if !found {
			if optional {
				continue
			}
			return nil, &configError{fmt.Sprintf("%s %q not found", strings.ToLower(kind), name)}
		}
		// Every key, as kubelet since relaxed variable names: the API validated the
		// keys and the prefix (printable ASCII, no '=').
		for _, k := range slices.Sorted(maps.Keys(data)) {
			l.set(src.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			l.set(e.Name, expand(e.Value, l.lookup))
			continue
		}
		v, ok, err := valueFrom(ctx, pe, c, e.ValueFrom, lookup)
		if err != nil {
			return nil, err
		}
		if ok {
			l.set(e.Name, v)
		}
	}
	return l.environ(), nil
}

func deref(b *bool) bool { return b != nil && *b }

func fetch(ctx context.Context, lookup Lookup, kind, ns, name string) (map[string]string, bool, error) {
	if lookup == nil {
		return nil, false, &configError{fmt.Sprintf("cannot read %s %s/%s: the agent has no API access for container environments", strings.ToLower(kind), ns, name)}
	}
	data, found, err := lookup(ctx, kind, ns, name)
	if err != nil {
		return nil, false, &configError{fmt.Sprintf("reading %s %s/%s: %v", strings.ToLower(kind), ns, name, err)}
	}
	return data, found, nil
}

// valueFrom resolves one env source; ok is false for an optional reference that is absent.
func valueFrom(ctx context.Context, pe podEnv, c *v1.Container, src *v1.EnvVarSource, lookup Lookup) (string, bool, error) {
	ns := ""
	if pe.pod != nil {
		ns = pe.pod.Namespace
	}
	switch {
	case src.FieldRef != nil:
		v, err := fieldValue(pe, src.FieldRef.FieldPath)
		return v, err == nil, err
	case src.ResourceFieldRef != nil:
		v, err := resourceValue(pe, c, src.ResourceFieldRef)
		return v, err == nil, err
	case src.ConfigMapKeyRef != nil, src.SecretKeyRef != nil:
		kind, name, key, optional := "ConfigMap", "", "", false
		if r := src.ConfigMapKeyRef; r != nil {
			name, key, optional = r.Name, r.Key, deref(r.Optional)
		} else {
			r := src.SecretKeyRef
			kind, name, key, optional = "Secret", r.Name, r.Key, deref(r.Optional)
		}
		data, found, err := fetch(ctx, lookup, kind, ns, name)
		if err != nil {
			return "", false, err
		}
		if !found {
			if optional {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("%s %q not found", strings.ToLower(kind), name)}
		}
		v, ok := data[key]
		if !ok {
			if optional {
				return "", false, nil
			}
			return "", false, &configError{fmt.Sprintf("couldn't find key %s in %s %s/%s", key, kind, ns, name)}
		}
		return v, true, nil
	}
	return "", false, nil
}

// fieldValue returns the value of a downward-API field path.
func fieldValue(pe podEnv, path string) (string, error) {
	pod := pe.pod
	if pod == nil {
		return "", &configError{"no pod for field " + path}
	}
	if name, key, ok := subscript(path); ok {
		switch name {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return first(pe.hostIPs), nil
	case "status.hostIPs":
		return strings.Join(pe.hostIPs, ","), nil
	case "status.podIP":
		return first(pe.podIPs), nil
	case "status.podIPs":
		return strings.Join(pe.podIPs, ","), nil
	}
	return "", &configError{fmt.Sprintf("unsupported fieldPath: %s", path)}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// subscript splits "metadata.labels['key']" into its map path and key.
func subscript(path string) (string, string, bool) {
	open := strings.Index(path, "['")
	if open < 0 || !strings.HasSuffix(path, "']") {
		return "", "", false
	}
	return path[:open], path[open+2 : len(path)-2], true
}

// formatMap renders labels or annotations the way the downward API does: sorted
// key="value" lines, values quoted with Go escaping.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// resourceValue resolves a resourceFieldRef as kubelet does: the container's limit, or
// the node's capacity when no limit is set (for limits.*), divided by the divisor and
// rounded up.
func resourceValue(pe podEnv, c *v1.Container, ref *v1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && pe.pod != nil {
		for _, cs := range [][]v1.Container{pe.pod.Spec.Containers, pe.pod.Spec.InitContainers} {
			for i := range cs {
				if cs[i].Name == ref.ContainerName {
					c = &cs[i]
				}
			}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var q resource.Quantity
	var ok bool
	switch ref.Resource {
	case "limits.cpu", "requests.cpu":
		q, ok = pick(c, ref.Resource, v1.ResourceCPU)
		if !ok {
			q = pe.nodeCPU
		}
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case "limits.memory", "requests.memory":
		q, ok = pick(c, ref.Resource, v1.ResourceMemory)
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		q, ok = pick(c, ref.Resource, v1.ResourceEphemeralStorage)
	default:
		return "", &configError{fmt.Sprintf("unsupported container resource : %v", ref.Resource)}
	}
	if !ok {
		if !strings.HasPrefix(ref.Resource, "limits.") {
			return "0", nil
		}
		q = pe.nodeMemory
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// pick returns the container's limit or request for name, per the "limits."/"requests."
// prefix of which.
func pick(c *v1.Container, which string, name v1.ResourceName) (resource.Quantity, bool) {
	if c == nil {
		return resource.Quantity{}, false
	}
	list := c.Resources.Limits
	if strings.HasPrefix(which, "requests.") {
		list = c.Resources.Requests
	}
	q, ok := list[name]
	return q, ok
}

// expand replaces $(VAR) with VAR's value when lookup knows it, leaves unknown
// references as written, turns $$ into $ (so $$(VAR) stays literal), and keeps any other
// $ as is: Kubernetes' expansion rules for env values, command and args.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// environLookup looks names up in a NAME=value list (the last definition wins).
func environLookup(env []string) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
