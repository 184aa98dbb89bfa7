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
// made with the Service and gone with it; kubectl shows it.
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
	s.must(t, "-n", ns, "delete", "service", "web")
	eventually(t, 10*time.Second, "the IPAddress gone with its Service", func() (bool, string) {
		_, err := ips.Get(ctx, svc.Spec.ClusterIP, metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), jsonOf(err)
	})
}
