package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// zonePod is a pod pinned to a node that answers HTTP with its hostname and is ready
// while its /healthz file exists (the same stand-in as proxyManifests' api pods).
const zonePod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: zoned}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
    - name: web
      image: busybox
      command: ["sh", "-c", "hostname > /tmp/index.html; echo ok > /tmp/healthz; exec busybox httpd -f -p 8080 -h /tmp"]
      readinessProbe:
        httpGet: {path: /healthz, port: 8080}
        periodSeconds: 1
        failureThreshold: 1
      volumeMounts:
        - {name: www, mountPath: /tmp}
  volumes:
    - name: www
      emptyDir: {}
---
`

// zoneClient is a busybox pod pinned to a node, whose namespace the requests leave from.
const zoneClient = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  containers:
    - name: c
      image: busybox
      command: ["sleep", "3600"]
---
`

// zoneServices select the zoned pods with each trafficDistribution; mixed-hints has no
// selector: the test writes its EndpointSlice, with one endpoint lacking hints.
const zoneServices = `apiVersion: v1
kind: Service
metadata:
  name: same-zone
spec:
  selector: {app: zoned}
  trafficDistribution: PreferSameZone
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: same-node
spec:
  selector: {app: zoned}
  trafficDistribution: PreferSameNode
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: mixed-hints
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
`

// TestTrafficDistribution runs trafficDistribution on the shared cluster, whose nodes
// are tranche-1 (zone a), tranche-2 (zone b) and tranche-3 (zone a): four pods (one on
// tranche-1, one on tranche-3, two on tranche-2) behind PreferSameZone and
// PreferSameNode services, clients on tranche-1 and tranche-2. It checks the hints the
// EndpointSlice controller writes, that each proxy keeps to them, upstream's fallbacks
// (same node → same zone → everywhere as the closer endpoints turn unready) and that
// hints are ignored when one ready endpoint lacks them.
func TestTrafficDistribution(t *testing.T) {
	trafficDistributionChecks(t, up(t))
}

// trafficDistributionChecks runs TestTrafficDistribution's checks on c, a cluster of
// nodes tranche-1..3 in zones a, b, a, in any proxy mode.
func trafficDistributionChecks(t *testing.T, c *localCluster) {
	s := c.srv
	ns := s.namespace(t)
	zones := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(s.must(t, "get", "nodes", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.labels.topology\.kubernetes\.io/zone}{"\n"}{end}`)), "\n") {
		name, zone, _ := strings.Cut(line, " ")
		zones[name] = zone
	}
	if zones["tranche-1"] != "a" || zones["tranche-2"] != "b" || zones["tranche-3"] != "a" {
		t.Fatalf("want tranche-1, -3 in zone a and tranche-2 in zone b: %v", zones)
	}
	manifests := fmt.Sprintf(zonePod, "z1", "tranche-1") + fmt.Sprintf(zonePod, "z3", "tranche-3") +
		fmt.Sprintf(zonePod, "z2a", "tranche-2") + fmt.Sprintf(zonePod, "z2b", "tranche-2") +
		fmt.Sprintf(zoneClient, "c1", "tranche-1") + fmt.Sprintf(zoneClient, "c2", "tranche-2") + zoneServices
	if _, errOut, err := s.kubectl(t, manifests, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	eventually(t, 60*time.Second, "4 zoned pods and 2 clients Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		return strings.Count(out, " True") == 6, out
	})
	for svc, want := range map[string]string{
		"same-zone": "z1=a/ z2a=b/ z2b=b/ z3=a/ ",
		"same-node": "z1=a/tranche-1 z2a=b/tranche-2 z2b=b/tranche-2 z3=a/tranche-3 ",
	} {
		eventually(t, 20*time.Second, "the hints of "+svc+"'s EndpointSlice", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name="+svc, "-o",
				`jsonpath={range .items[*].endpoints[*]}{.targetRef.name}={.hints.forZones[*].name}/{.hints.forNodes[*].name} {end}`)
			return sortedFields(out) == want, out
		})
	}
	c1, c2 := c.podNS(t, ns, "c1"), c.podNS(t, ns, "c2")
	ip := func(svc string) string {
		return "http://" + s.must(t, "get", "svc", svc, "-n", ns, "-o", "jsonpath={.spec.clusterIP}") + "/"
	}
	sameZone, sameNode, mixed := ip("same-zone"), ip("same-node"), ip("mixed-hints")
	// onlyFrom waits until n requests in a row from client land on the wanted pods only,
	// all of them answering: with 20 requests, a pod left out by mistake (1 in 2 or
	// more) would show with near certainty, as would a wanted pod never chosen.
	onlyFrom := func(t *testing.T, what, client, url string, want ...string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() (bool, string) {
			h := hits(client, url, 20)
			for _, p := range want {
				if h[p] == 0 {
					return false, fmt.Sprint(h)
				}
			}
			return len(h) == len(want), fmt.Sprint(h)
		})
	}
	onlyFrom(t, "PreferSameZone from zone a: z1 and z3 only", c1, sameZone, "z1", "z3")
	onlyFrom(t, "PreferSameZone from zone b: z2a and z2b only", c2, sameZone, "z2a", "z2b")
	onlyFrom(t, "PreferSameNode from tranche-1: z1 only", c1, sameNode, "z1")
	onlyFrom(t, "PreferSameNode from tranche-2: z2a and z2b only", c2, sameNode, "z2a", "z2b")

	t.Run("hints are ignored unless every ready endpoint has them", func(t *testing.T) {
		podIPs := map[string]string{}
		for _, p := range []string{"z1", "z3", "z2a", "z2b"} {
			podIPs[p] = s.must(t, "get", "pod", p, "-n", ns, "-o", "jsonpath={.status.podIP}")
		}
		slice := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: mixed-hints-1
  labels: {kubernetes.io/service-name: mixed-hints}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
  - {addresses: ["%s"], nodeName: tranche-1, zone: a, hints: {forZones: [{name: a}]}}
  - {addresses: ["%s"], nodeName: tranche-3, zone: a, hints: {forZones: [{name: a}]}}
  - {addresses: ["%s"], nodeName: tranche-2, zone: b, hints: {forZones: [{name: b}]}}
  - {addresses: ["%s"], nodeName: tranche-2, zone: b}
`, podIPs["z1"], podIPs["z3"], podIPs["z2a"], podIPs["z2b"])
		if _, errOut, err := s.kubectl(t, slice, "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		// 40 requests over 4 endpoints: each is missed with probability 0.75^40.
		eventually(t, 20*time.Second, "mixed-hints from zone a spreading over all 4 pods", func() (bool, string) {
			h := hits(c1, mixed, 40)
			return len(h) == 4 && h["z1"] > 0 && h["z3"] > 0 && h["z2a"] > 0 && h["z2b"] > 0, fmt.Sprint(h)
		})
		// With the hint-less endpoint not ready, every ready endpoint has hints again.
		slice = strings.Replace(slice, "zone: b}\n", "zone: b, conditions: {ready: false}}\n", 1)
		if _, errOut, err := s.kubectl(t, slice, "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("apply: %v %s", err, errOut)
		}
		onlyFrom(t, "mixed-hints from zone a keeping to zone a once the hint-less endpoint is not ready", c1, mixed, "z1", "z3")
	})

	t.Run("fallbacks: same node, then same zone, then everywhere", func(t *testing.T) {
		// unready removes a pod's readiness file; the test puts it back when it ends.
		unready := func(pod string) {
			healthz := filepath.Join(c.podDir(t, ns, pod), "volumes", "kubernetes.io~empty-dir", "www", "healthz")
			if err := os.Remove(healthz); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.WriteFile(healthz, []byte("ok\n"), 0o644) })
			eventually(t, 20*time.Second, pod+" not ready in same-zone's EndpointSlice", func() (bool, string) {
				out, _, _ := s.kubectl(t, "", "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=same-zone", "-o",
					`jsonpath={range .items[*].endpoints[*]}{.targetRef.name}={.conditions.ready} {end}`)
				return strings.Contains(out, pod+"=false"), out
			})
		}
		unready("z1")
		onlyFrom(t, "PreferSameNode from tranche-1 without z1: the same zone's z3", c1, sameNode, "z3")
		onlyFrom(t, "PreferSameZone from zone a without z1: z3", c1, sameZone, "z3")
		unready("z3")
		onlyFrom(t, "PreferSameZone from zone a with no ready pod there: zone b's", c1, sameZone, "z2a", "z2b")
		onlyFrom(t, "PreferSameNode from tranche-1 with no ready pod in its zone: zone b's", c1, sameNode, "z2a", "z2b")
		onlyFrom(t, "PreferSameZone from zone b unchanged", c2, sameZone, "z2a", "z2b")
	})

	t.Run("a relabelled node takes its new zone's endpoints", func(t *testing.T) {
		// The fallbacks above left z1 and z3 unready until their cleanup.
		eventually(t, 30*time.Second, "the zoned pods Ready again", func() (bool, string) {
			out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=zoned", "-o",
				`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
			return strings.Count(out, " True") == 4, out
		})
		onlyFrom(t, "PreferSameZone from tranche-1 in zone a", c1, sameZone, "z1", "z3")
		s.must(t, "label", "node", "tranche-1", "topology.kubernetes.io/zone=b", "--overwrite")
		t.Cleanup(func() {
			if _, errOut, err := s.kubectl(t, "", "label", "node", "tranche-1", "topology.kubernetes.io/zone=a", "--overwrite"); err != nil {
				t.Errorf("putting tranche-1 back in zone a: %v %s", err, errOut)
			}
		})
		// tranche-1's proxy now keeps to zone b, where the EndpointSlice controller has
		// moved z1 (its endpoint's zone and hint follow its node's label too).
		onlyFrom(t, "PreferSameZone from tranche-1 relabelled to zone b", c1, sameZone, "z1", "z2a", "z2b")
		onlyFrom(t, "PreferSameZone from zone b, z1 now among its endpoints", c2, sameZone, "z1", "z2a", "z2b")
		onlyFrom(t, "PreferSameNode from tranche-1 unchanged", c1, sameNode, "z1")
	})
}

// sortedFields returns s's space-separated fields sorted, each followed by a space.
func sortedFields(s string) string {
	f := strings.Fields(s)
	slices.Sort(f)
	return strings.Join(f, " ") + " "
}
