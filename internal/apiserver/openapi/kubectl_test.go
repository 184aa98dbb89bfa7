package openapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/tranche/tranche/internal/registry"
)

const kubectlPath = "/usr/bin/kubectl"

// fakeServer serves discovery, the OpenAPI documents and a create endpoint for services,
// just enough for kubectl explain and kubectl apply; it records the query of every POST.
type fakeServer struct {
	docs      *Documents
	resources []registry.Resource
	mu        sync.Mutex
	posts     []string
}

func (s *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	writeJSON := func(code int, v interface{}) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/api":
		writeJSON(200, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host}}})
	case p == "/apis":
		list := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		seen := map[string]bool{}
		for _, res := range s.resources {
			gv := res.GVK.GroupVersion()
			if gv.Group == "" || seen[gv.String()] {
				continue
			}
			seen[gv.String()] = true
			v := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
			list.Groups = append(list.Groups, metav1.APIGroup{Name: gv.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v})
		}
		writeJSON(200, list)
	case p == "/version":
		writeJSON(200, map[string]string{"major": "1", "minor": "32", "gitVersion": "v1.32.0"})
	case p == "/openapi/v2":
		if strings.Contains(r.Header.Get("Accept"), "protobuf") {
			w.Header().Set("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
			_, _ = w.Write(s.docs.V2Protobuf())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.docs.V2JSON())
	case p == "/openapi/v3":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(s.docs.V3Index())
	case strings.HasPrefix(p, "/openapi/v3/"):
		doc, _, ok := s.docs.V3(strings.TrimPrefix(p, "/openapi/v3/"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	case p == "/api/v1/namespaces/default/services" && r.Method == http.MethodPost:
		s.mu.Lock()
		s.posts = append(s.posts, r.URL.RawQuery)
		s.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = w.Write(body)
	default:
		if list, ok := s.resourceList(p); ok {
			writeJSON(200, list)
			return
		}
		writeJSON(404, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
			Reason: metav1.StatusReasonNotFound, Code: 404, Message: "not found"})
	}
}

// resourceList answers /api/v1 and /apis/<group>/<version> discovery.
func (s *fakeServer) resourceList(p string) (*metav1.APIResourceList, bool) {
	var gv schema.GroupVersion
	switch parts := strings.Split(strings.TrimPrefix(p, "/"), "/"); {
	case len(parts) == 2 && parts[0] == "api":
		gv.Version = parts[1]
	case len(parts) == 3 && parts[0] == "apis":
		gv = schema.GroupVersion{Group: parts[1], Version: parts[2]}
	default:
		return nil, false
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv.String()}
	for _, r := range s.resources {
		if r.GVK.GroupVersion() != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r.Plural, Namespaced: r.Namespaced,
			Kind: r.GVK.Kind, Verbs: r.ServedVerbs()})
	}
	return list, len(list.APIResources) > 0
}

// runKubectl runs the real kubectl against the fake server and returns its combined output.
func runKubectl(t *testing.T, server string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "kubeconfig")
	config := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: " + server +
		"\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: default\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(home, "cache")}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestKubectl points the real kubectl v1.32 at a server publishing these documents.
func TestKubectl(t *testing.T) {
	if _, err := os.Stat(kubectlPath); err != nil {
		t.Fatalf("this test needs the real kubectl at %s: %v", kubectlPath, err)
	}
	resources := clusterResources()
	docs, err := Build(resources, "v1.32.0-test")
	if err != nil {
		t.Fatal(err)
	}
	fake := &fakeServer{docs: docs, resources: resources}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{
			name: "explain service ports (v3)",
			args: []string{"explain", "services.spec.ports"},
			want: []string{"KIND:       Service", "VERSION:    v1", "FIELD: ports <[]ServicePort>",
				"The list of ports that are exposed by this service.", "port\t<integer> -required-",
				"targetPort\t<IntOrString>", "The port that will be exposed by this service."},
		},
		{
			name: "explain deployment spec recursively (v3)",
			args: []string{"explain", "deployment.spec", "--recursive"},
			want: []string{"GROUP:      apps", "KIND:       Deployment", "replicas\t<integer>", "selector\t<LabelSelector> -required-",
				"template\t<PodTemplateSpec> -required-", "containers\t<[]Container> -required-"},
		},
		{
			name: "explain container limits, a map of quantities (v3)",
			args: []string{"explain", "pods.spec.containers.resources.limits"},
			want: []string{"FIELD: limits <map[string]Quantity>", "Limits describes the maximum amount of compute resources allowed."},
		},
		{
			name: "explain a resource in a dotted group (v3)",
			args: []string{"explain", "ingresses.spec.rules.http.paths.backend.service.port"},
			want: []string{"GROUP:      networking.k8s.io", "FIELD: port <ServiceBackendPort>", "number\t<integer>"},
		},
		{
			name: "explain service ports (v2)",
			args: []string{"explain", "services.spec.ports", "--output", "plaintext-openapiv2"},
			want: []string{"KIND:     Service", "port\t<integer> -required-", "The port that will be exposed by this service."},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := runKubectl(t, srv.URL, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	// kubectl validates client-side, and rejects the unknown field itself, unless the PATCH
	// operation of the kind in the v3 document has the fieldValidation parameter.
	t.Run("apply leaves field validation to the server", func(t *testing.T) {
		manifest := filepath.Join(t.TempDir(), "svc.yaml")
		svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  bogus: 1\n  ports:\n  - port: 80\n"
		if err := os.WriteFile(manifest, []byte(svc), 0o600); err != nil {
			t.Fatal(err)
		}
		runKubectl(t, srv.URL, "apply", "-f", manifest, "--dry-run=server")
		fake.mu.Lock()
		defer fake.mu.Unlock()
		if len(fake.posts) != 1 || !strings.Contains(fake.posts[0], "fieldValidation=Strict") {
			t.Errorf("POST queries = %q, want one with fieldValidation=Strict", fake.posts)
		}
	})
}
