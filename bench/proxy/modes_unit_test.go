package proxy

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWorstPlacedRule checks that the iptables worst-placed ClusterIP is the last
// service rule of KUBE-SERVICES in iptables-save's own spelling (-d before the comment,
// /32 added), not a rule of another chain or the nodeports jump.
func TestWorstPlacedRule(t *testing.T) {
	save := `*nat
:KUBE-SERVICES - [0:0]
-A KUBE-SERVICES -d 10.96.1.1/32 -p tcp -m comment --comment "bench/s0:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A ! -s 10.128.0.0/9 -d 10.96.9.9/32 -p tcp -m comment --comment "bench/s0:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.96.1.100/32 -p tcp -m comment --comment "bench/s99:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS
COMMIT
`
	m := iptServiceRule.FindAllStringSubmatch(save, -1)
	if len(m) != 2 || m[len(m)-1][1] != "10.96.1.100" {
		t.Fatalf("matches %q, want the last to be 10.96.1.100 of two", m)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.50, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(d, c.q); got != c.want {
			t.Errorf("percentile(1..100 ms, %v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Errorf("percentile of one sample = %v, want it", got)
	}
}

// TestPrintTables checks that both tables name every mode, ipvs included with the
// reason its kernel figures are missing, and put the ratio under the goal's column.
func TestPrintTables(t *testing.T) {
	var buf bytes.Buffer
	ms := time.Millisecond
	printModes(&buf, []modeRow{
		{mode: "nftables", services: 1000, full: 30 * ms, fullCPU: 20 * ms, alone: 20 * ms, aloneCPU: 10 * ms, kernel: "nft -f of the dumped table", adds: []time.Duration{3 * ms, 1 * ms, 2 * ms}},
		{mode: "iptables (nft backend)", services: 10000, skipped: "not run above -iptables-nft-max 2000"},
		{mode: "ipvs", services: 1000, full: 10 * ms, fullCPU: 10 * ms, alone: 5 * ms, aloneCPU: 5 * ms, kernel: "FakeIPVS", adds: []time.Duration{ms}},
	}, "no CONFIG_IP_VS")
	out := buf.String()
	for _, want := range []string{"ratio (goal <= 1.5)", "1.50 / 2.00", "2ms / 3ms", "ipvs                    1000", "iptables (nft backend)  10000     -", "not run above -iptables-nft-max 2000", "cannot be measured on this machine (no CONFIG_IP_VS)"} {
		if !strings.Contains(out, want) {
			t.Errorf("sync table lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	printFirstPacket(&buf, []fpRow{{mode: "iptables", services: 100, target: "random", p50: 90 * time.Microsecond, p99: 300 * time.Microsecond, samples: 2000, tracked: "2050"}}, "no CONFIG_IP_VS")
	out = buf.String()
	for _, want := range []string{"iptables  100", "90µs", "300µs", "2050", "ipvs      -", "not measurable here", "ipvs: no CONFIG_IP_VS"} {
		if !strings.Contains(out, want) {
			t.Errorf("first-packet table lacks %q:\n%s", want, out)
		}
	}
}
