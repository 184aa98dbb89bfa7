package core

import (
	"net/url"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWith is a pod with the named containers and init containers.
func podWith(name string, containers, inits []string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c})
	}
	for _, c := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: c})
	}
	return p
}

func TestResolveContainer(t *testing.T) {
	cases := []struct {
		name      string
		pod       *v1.Pod
		container string
		want      string
		err       string
	}{
		{"only one", podWith("p", []string{"app"}, nil), "", "app", ""},
		{"named", podWith("p", []string{"app", "side"}, nil), "side", "side", ""},
		{"init", podWith("p", []string{"app"}, []string{"setup"}), "setup", "setup", ""},
		{"must choose", podWith("p", []string{"app", "side"}, []string{"setup"}), "", "",
			"a container name must be specified for pod p, choose one of: [app side] or one of the init containers: [setup]"},
		{"unknown", podWith("p", []string{"app", "side"}, nil), "nope", "",
			"container nope is not valid for pod p, choose one of: [app side]"},
		{"none", podWith("p", nil, nil), "", "", "the pod p does not have a container"},
		{"ephemeral", withEphemeral(podWith("p", []string{"app"}, nil), "debugger"), "debugger", "debugger", ""},
		{"unknown beside an ephemeral", withEphemeral(podWith("p", []string{"app"}, []string{"setup"}), "debugger"), "nope", "",
			"container nope is not valid for pod p, choose one of: [app] or one of the init containers: [setup] or one of the ephemeral containers: [debugger]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveContainer(tc.pod, tc.container)
			if tc.err != "" {
				if !apierrors.IsBadRequest(err) || err.Error() != tc.err {
					t.Fatalf("error %v, want a 400 %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestValidateLogOptions(t *testing.T) {
	cases := []struct {
		query, err string
	}{
		{"tailLines=0&limitBytes=1&sinceSeconds=5&follow=true", ""},
		{"sinceTime=2026-01-01T00:00:00Z", ""},
		{"tailLines=-2", `tailLines: Invalid value: "-2": must be greater than or equal to 0`},
		{"limitBytes=0", `limitBytes: Invalid value: "0": must be greater than 0`},
		{"sinceSeconds=x", `sinceSeconds: Invalid value: "x": must be greater than 0`},
		{"sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", "at most one of `sinceTime` or `sinceSeconds` may be specified"},
	}
	for _, tc := range cases {
		q, _ := url.ParseQuery(tc.query)
		err := validateLogOptions(q)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.query, err)
		case tc.err != "" && (err == nil || !apierrors.IsBadRequest(err) || err.Error() != tc.err):
			t.Errorf("%s: %v, want a 400 %q", tc.query, err, tc.err)
		}
	}
}

func TestProxyTarget(t *testing.T) {
	for in, want := range map[string][3]string{
		"web":            {"", "web", ""},
		"web:http":       {"", "web", "http"},
		"https:web:8443": {"https", "web", "8443"},
	} {
		s, n, p := proxyTarget(in)
		if [3]string{s, n, p} != want {
			t.Errorf("%s: %q %q %q, want %q", in, s, n, p, want)
		}
	}
}

func TestProxyRest(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/web/services/web/proxy":                   "",
		"/api/v1/namespaces/web/services/web:http/proxy/":             "/",
		"/api/v1/namespaces/a/pods/proxy/proxy/proxy/x/web/proxy/y":   "/proxy/x/web/proxy/y",
		"/api/v1/namespaces/a/services/https:web:443/proxy/healthz/a": "/healthz/a",
	} {
		if got := proxyRest(path); got != want {
			t.Errorf("%s: %q, want %q", path, got, want)
		}
	}
}

// withEphemeral adds an ephemeral container named name to pod.
func withEphemeral(pod *v1.Pod, name string) *v1.Pod {
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name}})
	return pod
}
