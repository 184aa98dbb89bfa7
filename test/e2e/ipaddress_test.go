package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServiceIPAddresses: as kube-apiserver, every ClusterIP is an IPAddress object
// named by the address with the Service as parentRef (the kubernetes Service's too),
// made with the Service and gone with it, made again when deleted by hand while the
// Service holds the address; kubectl shows it.
func TestServiceIPAddresses(t *testing.T) {
	c := up(t)
	s := c.srv
	ctx := context.Background()
	client := s.client(t)
	ns := s.namespace(t)
	ips := client.NetworkingV1().IPAddresses()

	kube, err := client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip, err := ips.Get(ctx, kube.Spec.ClusterIP, metav1.GetOptions{}); err != nil || ip.Spec.ParentRef == nil ||
		ip.Spec.ParentRef.Name != "kubernetes" || ip.Labels[networkingv1.LabelManagedBy] != "ipallocator.k8s.io" {
		t.Fatalf("IPAddress of the kubernetes Service %s: %v %s", kube.Spec.ClusterIP, err, jsonOf(ip))
	}
	s.mustStdin(t, "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n", "-n", ns, "apply", "-f", "-")
	svc, err := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := s.must(t, "get", "ipaddress", svc.Spec.ClusterIP, "--show-labels")
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(svc.Spec.ClusterIP) + `\s+services/` + ns + `/web\s+ipaddress\.kubernetes\.io/ip-family=IPv4,ipaddress\.kubernetes\.io/managed-by=ipallocator\.k8s\.io$`).MatchString(out) {
		t.Fatalf("kubectl get ipaddress %s:\n%s", svc.Spec.ClusterIP, out)
	}
	// Deleted by hand while the Service holds the address, it comes back within seconds
	// (the controller manager's repair loop), as kube-apiserver's repair controller
	// brings it back, with its warning event on the Service.
	s.must(t, "delete", "ipaddress", svc.Spec.ClusterIP)
	eventually(t, 15*time.Second, "the IPAddress deleted by hand back", func() (bool, string) {
		ip, err := ips.Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{})
		return err == nil && ip.Spec.ParentRef != nil && ip.Spec.ParentRef.Name == "web", jsonOf(err)
	})
	eventually(t, 10*time.Second, "the ClusterIPNotAllocated event on web", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "-n", ns, "get", "events", "--field-selector", "reason=ClusterIPNotAllocated,involvedObject.name=web",
			"-o", "custom-columns=TYPE:.type,MESSAGE:.message", "--no-headers")
		return strings.Join(strings.Fields(out), " ") == "Warning Cluster IP [IPv4]: "+svc.Spec.ClusterIP+" is not allocated; repairing", out
	})
	s.must(t, "-n", ns, "delete", "service", "web")
	eventually(t, 10*time.Second, "the IPAddress gone with its Service", func() (bool, string) {
		_, err := ips.Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), jsonOf(err)
	})
}

// TestServiceFromOtherServiceCIDR: a Service given an address of a second ServiceCIDR
// gets it (with its IPAddress) and carries traffic to its pod like one of the default
// range: the proxy's rules do not depend on the range. The client is the framework's
// agnhost exec pod running its `wget -T`.
func TestServiceFromOtherServiceCIDR(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	name := ns + "-cidr"
	s.mustStdin(t, "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: "+name+"}\nspec: {cidrs: [10.101.0.0/24]}\n", "apply", "-f", "-")
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "namespace", ns, "--wait=true", "--timeout=60s")
		_, _, _ = s.kubectl(t, "", "delete", "servicecidr", name, "--wait=false")
	})
	s.mustStdin(t, `apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: web
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080"]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers:
  - {name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: ["pause"]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  clusterIP: 10.101.0.20
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`, "-n", ns, "apply", "-f", "-")
	c.waitReady(t, ns, "web")
	c.waitReady(t, ns, "client")
	if out := s.must(t, "get", "ipaddress", "10.101.0.20", "-o", "jsonpath={.spec.parentRef.namespace}/{.spec.parentRef.name}"); out != ns+"/web" {
		t.Fatalf("IPAddress 10.101.0.20 parentRef %q, want %s/web", out, ns)
	}
	eventually(t, 30*time.Second, "web's hostname through 10.101.0.20", func() (bool, string) {
		// The e2e framework's form: Debian's busybox wget crashes on -T, the agnhost
		// image's wget takes it.
		out := execInPod(t, s, ns, "client", "wget", "-T", "2", "-qO-", "http://10.101.0.20/hostname")
		return strings.TrimSpace(out) == "web", out
	})
}
