package podfiles

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func makePod(ns, name string, mutate func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "uid-1"},
		Spec:       v1.PodSpec{DNSPolicy: v1.DNSClusterFirst},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// lines joins file lines with newlines, ending with one.
func lines(l ...string) string { return strings.Join(l, "\n") + "\n" }

const localhostBlock = "# Kubernetes-managed hosts file.\n" +
	"127.0.0.1\tlocalhost\n" +
	"::1\tlocalhost ip6-localhost ip6-loopback\n" +
	"fe00::0\tip6-localnet\n" +
	"fe00::0\tip6-mcastprefix\n" +
	"fe00::1\tip6-allnodes\n" +
	"fe00::2\tip6-allrouters\n"

func TestHosts(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		ips     []string
		want    string
		wantErr string
	}{{
		name: "pod name as hostname",
		pod:  makePod("default", "web-7d4b9c-x2x9z", nil),
		ips:  []string{"10.244.1.5"},
		want: localhostBlock + "10.244.1.5\tweb-7d4b9c-x2x9z\n",
	}, {
		name: "dual stack",
		pod:  makePod("default", "pod01", nil),
		ips:  []string{"10.244.1.4", "2001:db8::4"},
		want: localhostBlock + "10.244.1.4\tpod01\n2001:db8::4\tpod01\n",
	}, {
		name: "hostname and subdomain",
		pod: makePod("default", "p", func(p *v1.Pod) {
			p.Spec.Hostname = "pod-hostname"
			p.Spec.Subdomain = "pod-subdomain"
		}),
		ips:  []string{"172.17.0.3"},
		want: localhostBlock + "172.17.0.3\tpod-hostname.pod-subdomain.default.svc.cluster.local\tpod-hostname\n",
	}, {
		name: "no IP yet",
		pod:  makePod("default", "p", nil),
		want: localhostBlock,
	}, {
		name: "host aliases",
		pod: makePod("default", "hostaliases-pod", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{
				{IP: "127.0.0.1", Hostnames: []string{"foo.local", "bar.local"}},
				{IP: "10.1.2.3", Hostnames: []string{"foo.remote", "bar.remote"}},
			}
		}),
		ips: []string{"10.244.0.7"},
		want: localhostBlock + lines(
			"10.244.0.7\thostaliases-pod",
			"",
			"# Entries added by HostAliases.",
			"127.0.0.1\tfoo.local\tbar.local",
			"10.1.2.3\tfoo.remote\tbar.remote"),
	}, {
		name:    "invalid hostname",
		pod:     makePod("default", "p", func(p *v1.Pod) { p.Spec.Hostname = "Not_A_Label" }),
		wantErr: `pod default/p: pod Hostname "Not_A_Label" is not a valid DNS label`,
	}, {
		name:    "nil pod",
		wantErr: "no pod given",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Hosts(tt.pod, tt.ips, "cluster.local")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("hosts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostNetworkHosts(t *testing.T) {
	node := "127.0.0.1\tlocalhost\n10.240.0.2\tnode-1\n"
	pod := makePod("default", "p", func(p *v1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db"}}}
	})
	want := lines(
		"# Kubernetes-managed hosts file (host network).",
		"127.0.0.1\tlocalhost",
		"10.240.0.2\tnode-1",
		"",
		"# Entries added by HostAliases.",
		"10.1.2.3\tdb")
	if diff := cmp.Diff(want, string(HostNetworkHosts(pod, []byte(node)))); diff != "" {
		t.Errorf("hosts (-want +got):\n%s", diff)
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 62) + "-b-c"
	tests := []struct {
		name         string
		pod          *v1.Pod
		wantHostname string
		wantFQDN     string
		wantErr      string
	}{{
		name:         "pod name",
		pod:          makePod("ns", "web-0", nil),
		wantHostname: "web-0",
	}, {
		name:         "spec.hostname wins",
		pod:          makePod("ns", "web-0", func(p *v1.Pod) { p.Spec.Hostname = "h" }),
		wantHostname: "h",
	}, {
		name:         "long pod name truncated without trailing dash",
		pod:          makePod("ns", long, nil),
		wantHostname: strings.Repeat("a", 62),
	}, {
		name:         "subdomain gives an FQDN",
		pod:          makePod("ns", "web-0", func(p *v1.Pod) { p.Spec.Subdomain = "web" }),
		wantHostname: "web-0",
		wantFQDN:     "web-0.web.ns.svc.cluster.local",
	}, {
		name: "setHostnameAsFQDN",
		pod: makePod("ns", "web-0", func(p *v1.Pod) {
			p.Spec.Subdomain = "web"
			p.Spec.SetHostnameAsFQDN = new(true)
		}),
		wantHostname: "web-0.web.ns.svc.cluster.local",
		wantFQDN:     "web-0.web.ns.svc.cluster.local",
	}, {
		name: "setHostnameAsFQDN without subdomain is the short name",
		pod: makePod("ns", "web-0", func(p *v1.Pod) {
			p.Spec.SetHostnameAsFQDN = new(true)
		}),
		wantHostname: "web-0",
	}, {
		name: "FQDN too long for the kernel",
		pod: makePod("ns", strings.Repeat("a", 40), func(p *v1.Pod) {
			p.Spec.Subdomain = "web"
			p.Spec.SetHostnameAsFQDN = new(true)
		}),
		wantErr: "failed to construct FQDN from pod hostname and cluster domain, FQDN " + strings.Repeat("a", 40) + ".web.ns.svc.cluster.local is too long (64 characters is the max, 65 characters requested)",
	}, {
		name:    "invalid subdomain",
		pod:     makePod("ns", "p", func(p *v1.Pod) { p.Spec.Subdomain = "a.b" }),
		wantErr: `pod Subdomain "a.b" is not a valid DNS label`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, fqdn, err := Hostname(tt.pod, "cluster.local")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h != tt.wantHostname || fqdn != tt.wantFQDN {
				t.Errorf("Hostname = %q, %q; want %q, %q", h, fqdn, tt.wantHostname, tt.wantFQDN)
			}
		})
	}
}

func TestResolvConf(t *testing.T) {
	nodeResolv := lines(
		"# written by the node",
		"nameserver 10.240.0.1",
		"nameserver 10.240.0.254",
		"search corp.example. lab.example",
		"options edns0 timeout:2")
	clusterDNS := []string{"10.96.0.10"}
	tests := []struct {
		name         string
		pod          *v1.Pod
		clusterDNS   []string
		hostResolv   *string
		noHostResolv bool
		want         string
		wantWarnings []string
		wantErr      string
	}{{
		name: "ClusterFirst",
		pod:  makePod("signalements", "p", nil),
		want: lines(
			"search signalements.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example",
			"nameserver 10.96.0.10",
			"options ndots:5"),
	}, {
		name:       "ClusterFirst on a node without search domains",
		pod:        makePod("test", "p", nil),
		hostResolv: new("nameserver 10.240.0.1\n"),
		want: lines(
			"search test.svc.cluster.local svc.cluster.local cluster.local",
			"nameserver 10.96.0.10",
			"options ndots:5"),
	}, {
		name: "ClusterFirst drops node search domains already present",
		pod:  makePod("test", "p", nil),
		hostResolv: new(lines(
			"nameserver 10.240.0.1",
			"search cluster.local example.org")),
		want: lines(
			"search test.svc.cluster.local svc.cluster.local cluster.local example.org",
			"nameserver 10.96.0.10",
			"options ndots:5"),
	}, {
		name: "ClusterFirst on hostNetwork falls back to Default",
		pod:  makePod("test", "p", func(p *v1.Pod) { p.Spec.HostNetwork = true }),
		want: lines(
			"search corp.example lab.example",
			"nameserver 10.240.0.1",
			"nameserver 10.240.0.254",
			"options edns0 timeout:2"),
	}, {
		name: "ClusterFirstWithHostNet",
		pod: makePod("test", "p", func(p *v1.Pod) {
			p.Spec.HostNetwork = true
			p.Spec.DNSPolicy = v1.DNSClusterFirstWithHostNet
		}),
		want: lines(
			"search test.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example",
			"nameserver 10.96.0.10",
			"options ndots:5"),
	}, {
		name:       "ClusterFirst without cluster DNS falls back to Default",
		pod:        makePod("test", "p", nil),
		clusterDNS: []string{},
		want: lines(
			"search corp.example lab.example",
			"nameserver 10.240.0.1",
			"nameserver 10.240.0.254",
			"options edns0 timeout:2"),
		wantWarnings: []string{`pod: "p_test(uid-1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`},
	}, {
		name: "Default",
		pod:  makePod("test", "p", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault }),
		want: lines(
			"search corp.example lab.example",
			"nameserver 10.240.0.1",
			"nameserver 10.240.0.254",
			"options edns0 timeout:2"),
	}, {
		name:         "Default on a node without resolv.conf",
		pod:          makePod("test", "p", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSDefault }),
		noHostResolv: true,
		want: lines(
			"search .",
			"nameserver 127.0.0.1"),
	}, {
		name: "None with dnsConfig",
		pod: makePod("test", "p", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{
				Nameservers: []string{"192.0.2.1", "192.0.2.1"},
				Searches:    []string{"ns1.svc.cluster-domain.example", "my.dns.search.suffix"},
				Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: new("2")}, {Name: "edns0"}},
			}
		}),
		want: lines(
			"search ns1.svc.cluster-domain.example my.dns.search.suffix",
			"nameserver 192.0.2.1",
			"options ndots:2 edns0"),
	}, {
		name: "None without dnsConfig is empty",
		pod:  makePod("test", "p", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }),
		want: "",
	}, {
		name: "ClusterFirst with dnsConfig lowers ndots",
		pod: makePod("signalements", "p", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{
				Searches: []string{"svc.cluster.local", "extra.example"},
				Options:  []v1.PodDNSConfigOption{{Name: "ndots", Value: new("1")}, {Name: "single-request-reopen"}},
			}
		}),
		hostResolv: new("nameserver 10.240.0.1\n"),
		want: lines(
			"search signalements.svc.cluster.local svc.cluster.local cluster.local extra.example",
			"nameserver 10.96.0.10",
			"options ndots:1 single-request-reopen"),
	}, {
		name: "nameservers cut to three",
		pod: makePod("test", "p", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}}
		}),
		hostResolv: new(""),
		want: lines(
			"search test.svc.cluster.local svc.cluster.local cluster.local",
			"nameserver 10.96.0.10",
			"nameserver 192.0.2.1",
			"nameserver 192.0.2.2",
			"options ndots:5"),
		wantWarnings: []string{"Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 192.0.2.1 192.0.2.2"},
	}, {
		name: "search domains cut to 32",
		pod: makePod("t", "p", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: numbered("d", 33)}
		}),
		want: lines(
			"search "+strings.Join(numbered("d", 32), " "),
			"nameserver 192.0.2.1"),
		wantWarnings: []string{"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(numbered("d", 32), " ")},
	}, {
		name: "search line cut to 2048 characters",
		pod: makePod("t", "p", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: numbered(strings.Repeat("x", 200), 10)}
		}),
		want:         "search " + strings.Join(numbered(strings.Repeat("x", 200), 9), " ") + "\n",
		wantWarnings: []string{"Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(numbered(strings.Repeat("x", 200), 9), " ")},
	}, {
		name:       "malformed node resolv.conf",
		pod:        makePod("t", "p", nil),
		hostResolv: new("nameserver\n"),
		wantErr:    "pod t/p: node resolv.conf: line 1: nameserver list is empty",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := []byte(nodeResolv)
			if tt.hostResolv != nil {
				host = []byte(*tt.hostResolv)
			}
			if tt.noHostResolv {
				host = nil
			}
			dns := clusterDNS
			if tt.clusterDNS != nil {
				dns = tt.clusterDNS
			}
			cfg, err := PodDNS(tt.pod, dns, "cluster.local", host)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(cfg.Render())); diff != "" {
				t.Errorf("resolv.conf (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantWarnings, cfg.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			got, err := ResolvConf(tt.pod, dns, "cluster.local", host)
			if err != nil || string(got) != tt.want {
				t.Errorf("ResolvConf = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// numbered returns n distinct domains <prefix>a.example, <prefix>b.example, ...
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + string(rune('a'+i%26)) + strings.Repeat("z", i/26) + ".example"
	}
	return out
}
