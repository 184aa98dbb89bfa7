package e2e

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// netpolDB is shaped like the Bitnami PostgreSQL chart's policy: the database pods accept
// TCP 5432 from pods labelled as its clients, and may only reach DNS.
const netpolDB = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: db
spec:
  podSelector:
    matchLabels: {app.kubernetes.io/name: postgresql, app.kubernetes.io/instance: db}
  policyTypes: [Ingress, Egress]
  ingress:
  - ports:
    - port: 5432
    from:
    - podSelector:
        matchLabels: {db-client: "true"}
  egress:
  - ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: default-deny
spec:
  podSelector: {}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: egress-only
spec:
  podSelector:
    matchLabels: {app: web}
  egress:
  - to:
    - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
`

const netpolPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {%s}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10
`

// TestNetworkPolicyAPI: NetworkPolicies are served as kube-apiserver serves them (apply,
// defaults, the table, kubectl describe and explain, validation with upstream's field
// paths), the controller manager warns about a policy that selects nothing, and
// `tranche explain access` decides a default-deny plus allow case from the API.
func TestNetworkPolicyAPI(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	out, errOut, err := s.kubectl(t, netpolDB, "apply", "-n", ns, "-f", "-")
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s%s", err, out, errOut)
	}
	for _, want := range []string{"networkpolicy.networking.k8s.io/db created", "networkpolicy.networking.k8s.io/default-deny created"} {
		if !strings.Contains(out, want) {
			t.Fatalf("apply output lacks %q:\n%s", want, out)
		}
	}

	t.Run("defaults", func(t *testing.T) {
		got := s.must(t, "get", "netpol", "db", "-n", ns, "-o", "jsonpath={.spec.ingress[0].ports[0].protocol} {.metadata.generation}")
		if got != "TCP 1" {
			t.Errorf("db: protocol and generation %q, want \"TCP 1\"", got)
		}
		for name, want := range map[string]string{"default-deny": "Ingress", "egress-only": "Ingress Egress"} {
			if got := s.must(t, "get", "netpol", name, "-n", ns, "-o", "jsonpath={.spec.policyTypes[*]}"); got != want {
				t.Errorf("%s: policyTypes %q, want %q", name, got, want)
			}
		}
	})

	t.Run("table", func(t *testing.T) {
		out := s.must(t, "get", "netpol", "-n", ns)
		for _, re := range []string{
			`(?m)^NAME\s+POD-SELECTOR\s+AGE$`,
			`(?m)^db\s+app\.kubernetes\.io/instance=db,app\.kubernetes\.io/name=postgresql\s+\d+s$`,
			`(?m)^default-deny\s+<none>\s+\d+s$`,
			`(?m)^egress-only\s+app=web\s+\d+s$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("kubectl get netpol lacks %s:\n%s", re, out)
			}
		}
		out = s.must(t, "api-resources", "--api-group", "networking.k8s.io")
		if !regexp.MustCompile(`(?m)^networkpolicies\s+netpol\s+networking\.k8s\.io/v1\s+true\s+NetworkPolicy$`).MatchString(out) {
			t.Errorf("api-resources:\n%s", out)
		}
	})

	t.Run("describe", func(t *testing.T) {
		out := s.must(t, "describe", "networkpolicy", "db", "-n", ns)
		for _, re := range []string{
			`(?m)^Name:\s+db$`,
			`(?m)^Spec:$`,
			`(?m)^  PodSelector:\s+app\.kubernetes\.io/instance=db,app\.kubernetes\.io/name=postgresql$`,
			`(?m)^  Allowing ingress traffic:$`,
			`(?m)^    To Port: 5432/TCP$`,
			`(?m)^      PodSelector: db-client=true$`,
			`(?m)^  Allowing egress traffic:$`,
			`(?m)^    To Port: 53/UDP$`,
			`(?m)^  Policy Types: Ingress, Egress$`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("describe lacks %s:\n%s", re, out)
			}
		}
		out = s.must(t, "describe", "netpol", "egress-only", "-n", ns)
		for _, re := range []string{`(?m)^      IPBlock:$`, `(?m)^        CIDR: 10\.0\.0\.0/8$`, `(?m)^        Except: 10\.1\.0\.0/16$`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("describe egress-only lacks %s:\n%s", re, out)
			}
		}
	})

	t.Run("explain", func(t *testing.T) {
		out := s.must(t, "explain", "networkpolicy.spec")
		for _, want := range []string{"GROUP:      networking.k8s.io", "KIND:       NetworkPolicy", "FIELD: spec <NetworkPolicySpec>", "podSelector\t<LabelSelector>", "policyTypes\t<[]string>"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("invalid", func(t *testing.T) {
		bad := func(name, spec string) string {
			return "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: " + name + "\nspec:\n" + spec
		}
		for _, tc := range []struct{ name, manifest, want string }{
			{"ipblock-and-selector", bad("a", "  podSelector: {}\n  ingress:\n  - from:\n    - ipBlock: {cidr: 10.0.0.0/8}\n      podSelector: {}\n"),
				`spec.ingress[0].from[0]: Forbidden: may not specify both ipBlock and another peer`},
			{"except-outside", bad("b", "  podSelector: {}\n  egress:\n  - to:\n    - ipBlock: {cidr: 10.0.0.0/16, except: [10.1.0.0/24]}\n"),
				"spec.egress[0].to[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"},
			{"end-port", bad("c", "  podSelector: {}\n  ingress:\n  - ports:\n    - {port: 8080, endPort: 80}\n"),
				"spec.ingress[0].ports[0].endPort: Invalid value: 80: must be greater than or equal to `port`"},
			{"protocol", bad("d", "  podSelector: {}\n  ingress:\n  - ports:\n    - {port: 80, protocol: ICMP}\n"),
				`spec.ingress[0].ports[0].protocol: Unsupported value: "ICMP": supported values: "TCP", "UDP", "SCTP"`},
			{"policy-type", bad("e", "  podSelector: {}\n  policyTypes: [Ingress, Sideways]\n"),
				`spec.policyTypes[1]: Unsupported value: "Sideways": supported values: "Ingress", "Egress"`},
			{"empty-peer", bad("f", "  podSelector: {}\n  egress:\n  - to:\n    - {}\n"),
				`spec.egress[0].to[0]: Required value: must specify a peer`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, errOut, err := s.kubectl(t, tc.manifest, "apply", "-n", ns, "-f", "-")
				if err == nil {
					t.Fatal("an invalid NetworkPolicy was accepted")
				}
				if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "is invalid") {
					t.Errorf("error lacks %q:\n%s", tc.want, errOut)
				}
			})
		}
	})

	t.Run("server-side apply", func(t *testing.T) {
		manifest := "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: ssa\nspec:\n  podSelector:\n    matchLabels: {app.kubernetes.io/instance: db}\n  ingress:\n  - ports:\n    - port: 5432\n"
		for _, port := range []string{"5432", "6432"} {
			m := strings.Replace(manifest, "5432", port, 1)
			if out, errOut, err := s.kubectl(t, m, "apply", "--server-side", "-n", ns, "-f", "-"); err != nil {
				t.Fatalf("kubectl apply --server-side: %v\n%s%s", err, out, errOut)
			}
		}
		got := s.must(t, "get", "netpol", "ssa", "-n", ns, "-o", "jsonpath={.spec.ingress[0].ports[0].port} {.spec.ingress[0].ports[0].protocol} {.metadata.generation} {.metadata.managedFields[0].manager}")
		if got != "6432 TCP 2 kubectl" {
			t.Errorf("after two server-side applies: %q, want \"6432 TCP 2 kubectl\"", got)
		}
		// It selects the db pod: gone before tranche explain access looks at db's policies.
		if out := s.must(t, "delete", "netpol", "ssa", "-n", ns); !strings.Contains(out, `networkpolicy.networking.k8s.io "ssa" deleted`) {
			t.Errorf("delete: %s", out)
		}
	})

	t.Run("NoPodsSelected", func(t *testing.T) {
		c.apply(t, ns, "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: typo\nspec:\n  podSelector:\n    matchLabels: {app: wbe}\n")
		want := fmt.Sprintf(`Warning NoPodsSelected podSelector "app=wbe" selects no pod in namespace %q`, ns)
		eventually(t, 60*time.Second, "the NoPodsSelected event of typo", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=NetworkPolicy,involvedObject.name=typo",
				"-o", `jsonpath={range .items[*]}{.type} {.reason} {.message}{"\n"}{end}`)
			return strings.Contains(out, want), out
		})
	})

	t.Run("tranche explain access", func(t *testing.T) {
		for name, lbls := range map[string]string{
			"db":     "app.kubernetes.io/name: postgresql, app.kubernetes.io/instance: db",
			"client": `db-client: "true"`,
			"other":  "app: other",
		} {
			c.apply(t, ns, fmt.Sprintf(netpolPod, name, lbls))
		}
		for _, name := range []string{"db", "client", "other"} {
			c.waitReady(t, ns, name)
		}
		dbIP := s.must(t, "get", "pod", "db", "-n", ns, "-o", "jsonpath={.status.podIP}")
		// The cluster DNS's ClusterIP is judged at each of its pods (after the DNAT).
		dnsPods := strings.Fields(s.must(t, "get", "endpointslices", "-n", "kube-system", "-l", "kubernetes.io/service-name=kube-dns",
			"-o", `jsonpath={range .items[*].endpoints[?(@.conditions.ready==true)]}{.targetRef.name}{" "}{end}`))
		slices.Sort(dnsPods)
		dnsPods = slices.Compact(dnsPods)
		dnsWant := []string{fmt.Sprintf("%s/db -> 10.96.0.10:53/UDP is Service kube-system/kube-dns: judged at the endpoint each connection reaches (after the proxy's DNAT)", ns)}
		for _, p := range dnsPods {
			dnsWant = append(dnsWant,
				fmt.Sprintf("  %[1]s/db -> kube-system/%[2]s:53/UDP: ALLOWED", ns, p),
				fmt.Sprintf("    egress  (%[1]s/db): isolated by %[1]s/db; allowed by %[1]s/db spec.egress[0]", ns),
				fmt.Sprintf("    ingress (kube-system/%s): not isolated (no policy selects it for ingress): allowed", p))
		}
		for _, tc := range []struct {
			args []string
			code int
			want []string
		}{
			{[]string{"-n", ns, "other", dbIP + ":5432"}, 2, []string{
				fmt.Sprintf("%[1]s/other -> %[1]s/db:5432/TCP: DENIED", ns),
				fmt.Sprintf("  egress  (%[1]s/other): not isolated (no policy selects it for egress): allowed", ns),
				fmt.Sprintf("  ingress (%[1]s/db at %[2]s): isolated by %[1]s/db, %[1]s/default-deny; no rule allows it: denied", ns, dbIP),
			}},
			{[]string{"-n", ns, "client", "db:5432"}, 0, []string{
				fmt.Sprintf("%[1]s/client -> %[1]s/db:5432/TCP: ALLOWED", ns),
				fmt.Sprintf("  egress  (%[1]s/client): not isolated (no policy selects it for egress): allowed", ns),
				fmt.Sprintf("  ingress (%[1]s/db): isolated by %[1]s/db, %[1]s/default-deny; allowed by %[1]s/db spec.ingress[0]", ns),
			}},
			{[]string{ns + "/other", ns + "/db:5432"}, 2, []string{
				fmt.Sprintf("%[1]s/other -> %[1]s/db:5432/TCP: DENIED", ns),
				fmt.Sprintf("  egress  (%[1]s/other): not isolated (no policy selects it for egress): allowed", ns),
				fmt.Sprintf("  ingress (%[1]s/db): isolated by %[1]s/db, %[1]s/default-deny; no rule allows it: denied", ns),
			}},
			{[]string{"-n", ns, "db", "10.96.0.10:53/udp"}, 0, dnsWant},
			{[]string{"-n", ns, "db", "client:80"}, 2, []string{
				fmt.Sprintf("%[1]s/db -> %[1]s/client:80/TCP: DENIED", ns),
				fmt.Sprintf("  egress  (%[1]s/db): isolated by %[1]s/db; no rule allows it: denied", ns),
				fmt.Sprintf("  ingress (%[1]s/client): isolated by %[1]s/default-deny; no rule allows it: denied", ns),
			}},
		} {
			out, stderr, code := trancheExplain(t, s.kubeconfig, tc.args...)
			if code != tc.code {
				t.Errorf("tranche explain access %v: exit %d, want %d\n%s%s", tc.args, code, tc.code, out, stderr)
			}
			if got := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("tranche explain access %v printed:\n%s\nwant:\n%s", tc.args, out, strings.Join(tc.want, "\n"))
			}
		}
		_, stderr, code := trancheExplain(t, s.kubeconfig, "-n", ns, "client", "nope:80")
		if want := fmt.Sprintf(`tranche: TO: pod "nope" not found in namespace %q`, ns); code != 1 || strings.TrimSpace(stderr) != want {
			t.Errorf("unknown pod: exit %d, stderr %q, want 1 and %q", code, stderr, want)
		}
		_, stderr, code = trancheExplain(t, s.kubeconfig, "-n", ns, "client", "db:99999")
		if want := `tranche: TO "db:99999": port 99999: must be between 1 and 65535, inclusive`; code != 1 || strings.TrimSpace(stderr) != want {
			t.Errorf("bad port: exit %d, stderr %q, want 1 and %q", code, stderr, want)
		}
	})
}

// trancheExplain runs `tranche explain access --kubeconfig K args...` and returns stdout,
// stderr and the exit code.
func trancheExplain(t *testing.T, kubeconfig string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(trancheBin, append([]string{"explain", "access", "--kubeconfig", kubeconfig}, args...)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &exit):
		return out.String(), errb.String(), exit.ExitCode()
	default:
		t.Fatalf("running tranche explain: %v", err)
		return "", "", -1
	}
}
