package podsecurity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	admissionapi "k8s.io/pod-security-admission/admission/api"
	"k8s.io/utils/ptr"

	"github.com/tranche/tranche/internal/apiserver"
	"github.com/tranche/tranche/internal/registry/all"
	"github.com/tranche/tranche/internal/storage/memory"
)

// Kubernetes' messages for the pods the builders below make.
const (
	restrictedPlain   = `allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	baselinePriv      = `privileged (container "c" must not set securityContext.privileged=true)`
	baselineHostNet   = `host namespaces (hostNetwork=true)`
	restrictedNonRoot = `runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)`
)

// userHeader names the user of a test request (the test guard reads it).
const userHeader = "X-Test-User"

type userKey struct{}

// testGuard lets every request through with the user its userHeader names.
type testGuard struct{}

func (testGuard) Check(r *http.Request, _ apiserver.Request) (*http.Request, error) {
	return r.WithContext(context.WithValue(r.Context(), userKey{}, r.Header.Get(userHeader))), nil
}

func testUserName(ctx context.Context) string {
	u, _ := ctx.Value(userKey{}).(string)
	return u
}

// warnings records the Warning headers of a client's responses.
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// take returns the warnings recorded since the last take.
func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.list
	w.list = nil
	return out
}

// lockedBuffer is a log destination the server's goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// take returns the log lines written since the last take, decoded.
func (b *lockedBuffer) take(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if line == "" {
			continue
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	b.buf.Reset()
	return out
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	srv      *httptest.Server
	client   kubernetes.Interface
	warnings *warnings
	logs     *lockedBuffer
}

// newFixture serves tranche's real resources from memory with Pod Security configured
// by cfg.
func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	psa, err := New(cfg, testUserName, log)
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(apiserver.Config{Storage: memory.New(50 * time.Millisecond), Resources: all.Resources(),
		Validators: []apiserver.Validator{psa}, Guard: testGuard{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Close)
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	w := &warnings{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, srv: srv, warnings: w, logs: logs,
		client: kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL, WarningHandler: w, QPS: -1})}
	return f
}

// as is a client of the fixture's server acting as user.
func (f *fixture) as(user string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: f.srv.URL, WarningHandler: f.warnings, QPS: -1,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set(userHeader, user)
				return rt.RoundTrip(r)
			})
		}})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// namespace creates a namespace with labels and forgets the request's warnings.
func (f *fixture) namespace(name string, labels map[string]string) {
	f.t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := f.client.CoreV1().Namespaces().Create(f.ctx, ns, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.warnings.take()
	f.logs.take(f.t)
}

// auditViolations returns the audit-violations of the audit log lines written since
// the last take.
func (f *fixture) auditViolations() []string {
	f.t.Helper()
	var out []string
	for _, l := range f.logs.take(f.t) {
		if l["msg"] != "pod security audit" {
			continue
		}
		if v, ok := l["pod-security.kubernetes.io/audit-violations"].(string); ok {
			out = append(out, v)
		}
	}
	return out
}

func makePod(name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func privileged(p *v1.Pod) {
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
}

func hostNetwork(p *v1.Pod) { p.Spec.HostNetwork = true }

// restricted makes a pod that meets the restricted level.
func restricted(p *v1.Pod) {
	p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &v1.Capabilities{Drop: []v1.Capability{"ALL"}}}
}

// noRunAsNonRoot is restricted but for runAsNonRoot.
func noRunAsNonRoot(p *v1.Pod) {
	restricted(p)
	p.Spec.SecurityContext.RunAsNonRoot = nil
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m["pod-security.kubernetes.io/"+kv[i]] = kv[i+1]
	}
	return m
}

// TestPods: enforce refuses, warn warns and audit logs, for each level, pods of each
// kind, as Kubernetes' PodSecurity plugin does.
func TestPods(t *testing.T) {
	f := newFixture(t, Config{})
	cases := []struct {
		name   string
		labels map[string]string
		pod    func(*v1.Pod)
		// err is the whole refusal message; warn the warnings; audit the audit-violations.
		err   string
		warn  []string
		audit []string
	}{
		{name: "privileged allows privileged", labels: labels("enforce", "privileged", "warn", "privileged", "audit", "privileged"), pod: privileged},
		{name: "unlabelled is privileged", pod: privileged},
		{name: "enforce baseline refuses privileged", labels: labels("enforce", "baseline"), pod: privileged,
			err: `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + baselinePriv},
		{name: "enforce baseline refuses hostNetwork", labels: labels("enforce", "baseline"), pod: hostNetwork,
			err: `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + baselineHostNet},
		{name: "enforce baseline allows a plain pod", labels: labels("enforce", "baseline"), pod: nil},
		{name: "enforce restricted refuses a plain pod", labels: labels("enforce", "restricted"), pod: nil,
			err: `pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedPlain},
		{name: "enforce restricted refuses missing runAsNonRoot", labels: labels("enforce", "restricted"), pod: noRunAsNonRoot,
			err: `pods "p" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedNonRoot},
		{name: "enforce restricted allows a restricted pod", labels: labels("enforce", "restricted"), pod: restricted},
		{name: "enforce with a version", labels: labels("enforce", "baseline", "enforce-version", "v1.30"), pod: privileged,
			err: `pods "p" is forbidden: violates PodSecurity "baseline:v1.30": ` + baselinePriv},
		{name: "warn baseline warns about privileged", labels: labels("warn", "baseline"), pod: privileged,
			warn: []string{`would violate PodSecurity "baseline:latest": ` + baselinePriv}},
		{name: "warn baseline warns about hostNetwork", labels: labels("warn", "baseline"), pod: hostNetwork,
			warn: []string{`would violate PodSecurity "baseline:latest": ` + baselineHostNet}},
		{name: "warn restricted warns about missing runAsNonRoot", labels: labels("warn", "restricted"), pod: noRunAsNonRoot,
			warn: []string{`would violate PodSecurity "restricted:latest": ` + restrictedNonRoot}},
		{name: "warn restricted is quiet for a restricted pod", labels: labels("warn", "restricted"), pod: restricted},
		{name: "warn privileged is quiet", labels: labels("warn", "privileged"), pod: privileged},
		{name: "audit baseline logs privileged", labels: labels("audit", "baseline"), pod: privileged,
			audit: []string{`would violate PodSecurity "baseline:latest": ` + baselinePriv}},
		{name: "audit restricted logs a plain pod", labels: labels("audit", "restricted"), pod: nil,
			audit: []string{`would violate PodSecurity "restricted:latest": ` + restrictedPlain}},
		{name: "audit restricted is quiet for a restricted pod", labels: labels("audit", "restricted"), pod: restricted},
		{name: "enforce baseline warns at restricted", labels: labels("enforce", "baseline", "warn", "restricted", "audit", "restricted"), pod: nil,
			warn:  []string{`would violate PodSecurity "restricted:latest": ` + restrictedPlain},
			audit: []string{`would violate PodSecurity "restricted:latest": ` + restrictedPlain}},
		{name: "a refused pod gets no warning", labels: labels("enforce", "baseline", "warn", "restricted", "audit", "restricted"), pod: privileged,
			err:   `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + baselinePriv,
			audit: []string{`would violate PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), ` + restrictedPlain}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			ns := fmt.Sprintf("ns-%d", i)
			f.namespace(ns, tc.labels)
			_, err := f.client.CoreV1().Pods(ns).Create(f.ctx, makePod("p", tc.pod), metav1.CreateOptions{})
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
				if tc.err != "" && !apierrors.IsForbidden(err) {
					t.Errorf("error %v is not Forbidden", err)
				}
			}
			if gotErr != tc.err {
				t.Errorf("error:\n got %s\nwant %s", gotErr, tc.err)
			}
			if d := cmp.Diff(tc.warn, f.warnings.take()); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.audit, f.auditViolations()); d != "" {
				t.Errorf("audit (-want +got):\n%s", d)
			}
		})
	}
}

// TestClusterDefaults: namespaces without labels take the configured levels.
func TestClusterDefaults(t *testing.T) {
	f := newFixture(t, Config{Defaults: admissionapi.PodSecurityDefaults{Enforce: "baseline", Warn: "restricted"}})
	f.namespace("plain", nil)
	_, err := f.client.CoreV1().Pods("plain").Create(f.ctx, makePod("p", privileged), metav1.CreateOptions{})
	if want := `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + baselinePriv; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	if _, err := f.client.CoreV1().Pods("plain").Create(f.ctx, makePod("q", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{`would violate PodSecurity "restricted:latest": ` + restrictedPlain}, f.warnings.take()); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	// A label relaxes the default.
	f.namespace("open", labels("enforce", "privileged", "warn", "privileged"))
	if _, err := f.client.CoreV1().Pods("open").Create(f.ctx, makePod("p", privileged), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestExemptions: exempt namespaces, users and runtime classes are not evaluated.
func TestExemptions(t *testing.T) {
	f := newFixture(t, Config{Exemptions: admissionapi.PodSecurityExemptions{
		Namespaces: []string{"kube-system"}, Usernames: []string{"ci-bot"}, RuntimeClasses: []string{"kata"}}})
	strict := labels("enforce", "restricted", "warn", "restricted", "audit", "restricted")
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: strict}}
	if _, err := f.client.CoreV1().Namespaces().Create(f.ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{`namespace "kube-system" is exempt from Pod Security, and the policy (enforce=restricted:latest, audit=restricted:latest, warn=restricted:latest) will be ignored`}
	if d := cmp.Diff(want, f.warnings.take()); d != "" {
		t.Errorf("labelling an exempt namespace (-want +got):\n%s", d)
	}
	f.namespace("strict", strict)
	for _, tc := range []struct {
		name, ns string
		client   kubernetes.Interface
		pod      func(*v1.Pod)
	}{
		{"exempt namespace", "kube-system", f.client, privileged},
		{"exempt user", "strict", f.as("ci-bot"), privileged},
		{"exempt runtime class", "strict", f.client, func(p *v1.Pod) { privileged(p); p.Spec.RuntimeClassName = ptr.To("kata") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.t = t
			if _, err := tc.client.CoreV1().Pods(tc.ns).Create(f.ctx, makePod(strings.ReplaceAll(tc.name, " ", "-"), tc.pod), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if w := f.warnings.take(); len(w) > 0 {
				t.Errorf("warnings: %q", w)
			}
			if a := f.auditViolations(); len(a) > 0 {
				t.Errorf("audit: %q", a)
			}
		})
	}
	f.t = t
	// Another user, another runtime class: refused.
	_, err := f.as("alice").CoreV1().Pods("strict").Create(f.ctx, makePod("alice", func(p *v1.Pod) {
		restricted(p)
		p.Spec.RuntimeClassName = ptr.To("runc")
		p.Spec.HostNetwork = true
	}), metav1.CreateOptions{})
	if want := `pods "alice" is forbidden: violates PodSecurity "restricted:latest": ` + baselineHostNet; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func makeDeployment(name string, mutate func(*v1.Pod)) *appsv1.Deployment {
	p := makePod("", mutate)
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: p.Spec},
		},
	}
}

// TestTemplates: pod templates are warned about and audited, never refused.
func TestTemplates(t *testing.T) {
	f := newFixture(t, Config{})
	f.namespace("warned", labels("warn", "baseline"))
	d, err := f.client.AppsV1().Deployments("warned").Create(f.ctx, makeDeployment("web", privileged), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`would violate PodSecurity "baseline:latest": ` + baselinePriv}
	if diff := cmp.Diff(want, f.warnings.take()); diff != "" {
		t.Errorf("deployment create (-want +got):\n%s", diff)
	}
	// An update evaluates the template again.
	d.Spec.Template.Spec.HostNetwork = true
	if _, err := f.client.AppsV1().Deployments("warned").Update(f.ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{`would violate PodSecurity "baseline:latest": ` + baselineHostNet + ", " + baselinePriv}
	if diff := cmp.Diff(want, f.warnings.take()); diff != "" {
		t.Errorf("deployment update (-want +got):\n%s", diff)
	}

	// enforce=restricted: the template is warned about at the enforce level (warn
	// follows a stricter enforce) and audited, but the Deployment is stored.
	f.namespace("enforced", labels("enforce", "restricted", "audit", "baseline"))
	if _, err := f.client.AppsV1().Deployments("enforced").Create(f.ctx, makeDeployment("web", privileged), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{`would violate PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true), ` + restrictedPlain}
	if diff := cmp.Diff(want, f.warnings.take()); diff != "" {
		t.Errorf("deployment in an enforced namespace (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`would violate PodSecurity "baseline:latest": ` + baselinePriv}, f.auditViolations()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	// A pod of the same template is refused.
	_, err = f.client.CoreV1().Pods("enforced").Create(f.ctx, makePod("web-1", privileged), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("pod of the template: got %v, want Forbidden", err)
	}
}

// TestPodUpdates: updates are evaluated when they change images, as Kubernetes does;
// label and status changes of an existing pod are not.
func TestPodUpdates(t *testing.T) {
	f := newFixture(t, Config{})
	f.namespace("upd", nil)
	pod, err := f.client.CoreV1().Pods("upd").Create(f.ctx, makePod("p", privileged), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := f.client.CoreV1().Namespaces().Get(f.ctx, "upd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels = labels("enforce", "baseline")
	if _, err := f.client.CoreV1().Namespaces().Update(f.ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.warnings.take()
	pod.Labels = map[string]string{"a": "b"}
	if pod, err = f.client.CoreV1().Pods("upd").Update(f.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("label update: %v", err)
	}
	pod.Status.Message = "hello"
	if pod, err = f.client.CoreV1().Pods("upd").UpdateStatus(f.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status update: %v", err)
	}
	pod.Spec.Containers[0].Image = "busybox:2"
	_, err = f.client.CoreV1().Pods("upd").Update(f.ctx, pod, metav1.UpdateOptions{})
	if want := `pods "p" is forbidden: violates PodSecurity "baseline:latest": ` + baselinePriv; err == nil || err.Error() != want {
		t.Fatalf("image update: got %v, want %s", err, want)
	}
}

// TestEphemeralContainers: adding an ephemeral container through
// pods/ephemeralcontainers is judged like a pod, as Kubernetes' PodSecurity plugin
// does: enforce refuses a privileged debug container (kubectl debug --profile=sysadmin),
// warn warns about one that is not restricted, and a compliant one passes quietly.
func TestEphemeralContainers(t *testing.T) {
	f := newFixture(t, Config{})
	f.namespace("dbg", labels("enforce", "baseline", "warn", "restricted"))
	pods := f.client.CoreV1().Pods("dbg")
	pod, err := pods.Create(f.ctx, makePod("p", restricted), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.warnings.take()
	add := func(name string, sc *v1.SecurityContext) error {
		t.Helper()
		cur, err := pods.Get(f.ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.EphemeralContainers = append(cur.Spec.EphemeralContainers, v1.EphemeralContainer{
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: name, Image: "busybox", SecurityContext: sc},
			TargetContainerName:      "c",
		})
		_, err = pods.UpdateEphemeralContainers(f.ctx, "p", cur, metav1.UpdateOptions{})
		return err
	}

	err = add("root", &v1.SecurityContext{Privileged: ptr.To(true)})
	want := `pods "p" is forbidden: violates PodSecurity "baseline:latest": privileged (container "root" must not set securityContext.privileged=true)`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("privileged debug container: got %v, want %s", err, want)
	}
	if err := add("tidy", pod.Spec.Containers[0].SecurityContext); err != nil {
		t.Fatalf("restricted debug container: %v", err)
	}
	if w := f.warnings.take(); len(w) != 0 {
		t.Errorf("a restricted debug container got warnings %v", w)
	}
	if err := add("plain", nil); err != nil {
		t.Fatalf("baseline debug container: %v", err)
	}
	wantWarn := []string{`would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "plain" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "plain" must set securityContext.capabilities.drop=["ALL"])`}
	if d := cmp.Diff(wantWarn, f.warnings.take()); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}

// TestNamespaceLabels: invalid levels and versions are refused with Kubernetes'
// messages; raising the enforce level warns about the existing pods that violate it.
func TestNamespaceLabels(t *testing.T) {
	f := newFixture(t, Config{})
	invalid := []struct {
		labels map[string]string
		want   string
	}{
		{labels("enforce", "strict"), `Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, baseline, restricted`},
		{labels("warn", "Baseline"), `Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/warn]: Invalid value: "Baseline": must be one of privileged, baseline, restricted`},
		{labels("audit-version", "1.30"), `Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/audit-version]: Invalid value: "1.30": must be "latest" or "v1.x"`},
		{labels("enforce", "baseline", "enforce-version", "v2.0"), `Namespace "bad" is invalid: metadata.labels[pod-security.kubernetes.io/enforce-version]: Invalid value: "v2.0": must be "latest" or "v1.x"`},
	}
	for _, tc := range invalid {
		_, err := f.client.CoreV1().Namespaces().Create(f.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bad", Labels: tc.labels}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || err.Error() != tc.want {
			t.Errorf("create with %v:\n got %v\nwant %s", tc.labels, err, tc.want)
		}
	}

	f.namespace("busy", nil)
	for _, p := range []*v1.Pod{makePod("b-priv", privileged), makePod("a-priv", privileged), makePod("net", hostNetwork), makePod("plain", nil), makePod("good", restricted)} {
		if _, err := f.client.CoreV1().Pods("busy").Create(f.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update := func(l map[string]string) ([]string, error) {
		t.Helper()
		ns, err := f.client.CoreV1().Namespaces().Get(f.ctx, "busy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Labels = l
		f.warnings.take()
		_, err = f.client.CoreV1().Namespaces().Update(f.ctx, ns, metav1.UpdateOptions{})
		return f.warnings.take(), err
	}
	got, err := update(labels("enforce", "baseline"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`existing pods in namespace "busy" violate the new PodSecurity enforce level "baseline:latest"`,
		`a-priv (and 1 other pod): privileged`,
		`net: host namespaces`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("enforce=baseline (-want +got):\n%s", d)
	}
	got, err = update(labels("enforce", "restricted"))
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		`existing pods in namespace "busy" violate the new PodSecurity enforce level "restricted:latest"`,
		`a-priv (and 1 other pod): privileged, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
		`net: host namespaces, allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
		`plain: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("enforce=restricted (-want +got):\n%s", d)
	}
	// Relaxing, or changing other labels, checks nothing.
	if got, err = update(labels("enforce", "baseline", "team", "a")); err != nil || len(got) > 0 {
		t.Errorf("relaxing: %v, warnings %q", err, got)
	}
	// An invalid value is refused on update too; the namespace keeps its labels.
	_, err = update(labels("enforce", "everything"))
	if want := `Namespace "busy" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "everything": must be one of privileged, baseline, restricted`; !apierrors.IsInvalid(err) || err.Error() != want {
		t.Errorf("invalid update:\n got %v\nwant %s", err, want)
	}
	ns, err := f.client.CoreV1().Namespaces().Get(f.ctx, "busy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := ns.Labels["pod-security.kubernetes.io/enforce"]; l != "baseline" {
		t.Errorf("enforce label is %q after a refused update", l)
	}
}

// TestConfig: bad configurations are refused before serving.
func TestConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Defaults: admissionapi.PodSecurityDefaults{Enforce: "strict"}},
		{Defaults: admissionapi.PodSecurityDefaults{WarnVersion: "1.30"}},
		{Exemptions: admissionapi.PodSecurityExemptions{Namespaces: []string{"Not_A_Name"}}},
	} {
		if _, err := New(cfg, nil, nil); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	if _, err := New(Config{}, nil, nil); err != nil {
		t.Errorf("the zero Config: %v", err)
	}
}
