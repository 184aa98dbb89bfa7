package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// curlHost runs curl on the host (the root namespace: where a user of `tranche up`
// is) and returns the response headers and body, or curl's exit code when it failed
// (7: connection refused).
func curlHost(url string) (string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", "-sS", "-i", "-m", "5", url).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		return err.Error(), -1
	}
	return string(out), 0
}

// servedByNginx reports whether a curl -i output is nginx's welcome page, which seed 003
// expects from its nginx Deployment.
func servedByNginx(out string) bool {
	return strings.HasPrefix(out, "HTTP/1.1 200") && regexp.MustCompile(`(?mi)^Server: nginx`).MatchString(out) &&
		strings.Contains(out, "<title>Welcome to nginx!</title>")
}

const clashingLB = `apiVersion: v1
kind: Service
metadata:
  name: lb-clash
spec:
  type: LoadBalancer
  loadBalancerIP: %s
  selector:
    app: svc-example
  ports:
    - protocol: TCP
      port: 80
      targetPort: 80
`

// directLB has no node ports: the publisher forwards to the endpoints themselves.
const directLB = `apiVersion: v1
kind: Service
metadata:
  name: lb-direct
spec:
  type: LoadBalancer
  allocateLoadBalancerNodePorts: false
  selector:
    app: svc-example
  ports:
    - protocol: TCP
      port: 8081
      targetPort: 80
`

// sharingLB asks for another Service's address, on another port: the two share it.
const sharingLB = `apiVersion: v1
kind: Service
metadata:
  name: lb-share
spec:
  type: LoadBalancer
  loadBalancerIP: %s
  selector:
    app: svc-example
  ports:
    - protocol: TCP
      port: 8080
      targetPort: 80
`

// sctpLB has a port the host publisher does not forward.
const sctpLB = `apiVersion: v1
kind: Service
metadata:
  name: lb-sctp
spec:
  type: LoadBalancer
  ports:
    - name: assoc
      protocol: SCTP
      port: 9999
`

// TestHostPublisher: seed 003's Services from the host of `tranche up`. svc-nodeport
// answers on 127.0.0.1:30080; svc-loadbalancer gets an EXTERNAL-IP of 127.0.10.0/24
// and answers there; a Service asking for the same address and port stays <pending>
// with an Event naming the holder; deleting svc-loadbalancer stops its listener and
// frees the address, which the waiting Service then gets and serves. A LoadBalancer
// without node ports (allocateLoadBalancerNodePorts: false) answers too, until it
// becomes a ClusterIP Service; a Service asking for a used address on another port
// shares it; an SCTP port gets an Event saying it is not published on the host.
func TestHostPublisher(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	// NodePort 30080 is cluster-wide: another test's namespace being deleted may
	// still hold it for a while.
	eventually(t, 60*time.Second, "seed 003 Services applied", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "apply", "-n", ns, "-f", "testdata/003-services.yaml")
		return err == nil, out + errOut
	})
	eventually(t, 60*time.Second, "an nginx pod Ready", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "pods", "-n", ns, "-l", "app=svc-example", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {end}`)
		return strings.Contains(out, "True"), out
	})

	eventually(t, 30*time.Second, "127.0.0.1:30080 answers from the host", func() (bool, string) {
		out, code := curlHost("http://127.0.0.1:30080/")
		return code == 0 && servedByNginx(out), tail(out, 300)
	})

	row := regexp.MustCompile(`(?m)^svc-loadbalancer\s+LoadBalancer\s+10\.\S+\s+(127\.0\.10\.\d+)\s+80:3\d{4}/TCP\s`)
	var ip string
	eventually(t, 30*time.Second, "svc-loadbalancer gets an EXTERNAL-IP in 127.0.10.0/24", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "svc", "svc-loadbalancer", "-n", ns)
		if m := row.FindStringSubmatch(out); m != nil {
			ip = m[1]
		}
		return ip != "", out
	})
	eventually(t, 30*time.Second, "http://"+ip+"/ answers from the host", func() (bool, string) {
		out, code := curlHost("http://" + ip + "/")
		return code == 0 && servedByNginx(out), tail(out, 300)
	})

	if _, errOut, err := s.kubectl(t, directLB, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply lb-direct: %v %s", err, errOut)
	}
	directRow := regexp.MustCompile(`(?m)^lb-direct\s+LoadBalancer\s+10\.\S+\s+(127\.0\.10\.\d+)\s+8081/TCP\s`)
	var directIP string
	eventually(t, 30*time.Second, "lb-direct gets an EXTERNAL-IP and no node port", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "svc", "lb-direct", "-n", ns)
		if m := directRow.FindStringSubmatch(out); m != nil {
			directIP = m[1]
		}
		return directIP != "", out
	})
	eventually(t, 30*time.Second, "http://"+directIP+":8081/ answers from the host", func() (bool, string) {
		out, code := curlHost("http://" + directIP + ":8081/")
		return code == 0 && servedByNginx(out), tail(out, 300)
	})

	// A type change releases the address and stops the listener.
	s.must(t, "patch", "svc", "lb-direct", "-n", ns, "-p", `{"spec":{"type":"ClusterIP"}}`)
	eventually(t, 30*time.Second, "http://"+directIP+":8081/ refused once lb-direct is a ClusterIP Service", func() (bool, string) {
		out, code := curlHost("http://" + directIP + ":8081/")
		return code == 7, tail(out, 300)
	})
	if out := s.must(t, "get", "svc", "lb-direct", "-n", ns, "-o", "jsonpath={.status.loadBalancer.ingress}"); out != "" {
		t.Fatalf("lb-direct kept its load-balancer status after the type change: %s", out)
	}

	if _, errOut, err := s.kubectl(t, strings.Replace(sharingLB, "%s", ip, 1), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply lb-share: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "lb-share shares "+ip+" and answers on port 8080", func() (bool, string) {
		out, code := curlHost("http://" + ip + ":8080/")
		return code == 0 && servedByNginx(out), tail(out, 300)
	})
	if out, code := curlHost("http://" + ip + "/"); code != 0 || !servedByNginx(out) {
		t.Fatalf("svc-loadbalancer stopped answering on %s:80 once shared: exit %d\n%s", ip, code, tail(out, 300))
	}
	s.must(t, "delete", "svc", "lb-share", "-n", ns)

	if _, errOut, err := s.kubectl(t, sctpLB, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply lb-sctp: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "lb-sctp gets an Event: SCTP is not published on the host", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=lb-sctp")
		return strings.Contains(out, "ProtocolNotPublished") && strings.Contains(out, "Port assoc (SCTP/9999) is not published on the host"), out
	})

	if _, errOut, err := s.kubectl(t, strings.Replace(clashingLB, "%s", ip, 1), "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply lb-clash: %v %s", err, errOut)
	}
	eventually(t, 30*time.Second, "lb-clash pending with an Event naming the holder", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "events", "-n", ns, "--field-selector", "involvedObject.name=lb-clash")
		return strings.Contains(out, "AddressPending") &&
			strings.Contains(out, "port TCP/80 of "+ip+" is already used by Service "+ns+"/svc-loadbalancer"), out
	})
	if out := s.must(t, "get", "svc", "lb-clash", "-n", ns); !regexp.MustCompile(`(?m)^lb-clash\s+LoadBalancer\s+\S+\s+<pending>\s`).MatchString(out) {
		t.Fatalf("lb-clash should be <pending>:\n%s", out)
	}

	s.must(t, "delete", "svc", "svc-loadbalancer", "-n", ns)
	// The listener goes with the Service; the waiting one then takes the address,
	// and a listener opens again for it.
	eventually(t, 30*time.Second, "lb-clash takes "+ip, func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "svc", "lb-clash", "-n", ns)
		return regexp.MustCompile(`(?m)^lb-clash\s+LoadBalancer\s+\S+\s+` + regexp.QuoteMeta(ip) + `\s`).MatchString(out), out
	})
	eventually(t, 30*time.Second, "http://"+ip+"/ answers for lb-clash", func() (bool, string) {
		out, code := curlHost("http://" + ip + "/")
		return code == 0 && servedByNginx(out), tail(out, 300)
	})
	s.must(t, "delete", "svc", "lb-clash", "-n", ns)
	eventually(t, 30*time.Second, "http://"+ip+"/ refused once no Service has it", func() (bool, string) {
		out, code := curlHost("http://" + ip + "/")
		return code == 7, tail(out, 300)
	})
}

const localUDPApp = `apiVersion: v1
kind: Pod
metadata:
  name: netexec
  labels: {app: netexec}
spec:
  containers:
  - name: netexec
    image: registry.k8s.io/e2e-test-images/agnhost:2.52
    args: ["netexec", "--http-port=8080", "--udp-port=8081"]
    ports:
    - {containerPort: 8080, protocol: TCP}
    - {containerPort: 8081, protocol: UDP}
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata:
  name: netexec
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {app: netexec}
  ports:
  - {name: http, protocol: TCP, port: 8080, targetPort: 8080}
  - {name: udp, protocol: UDP, port: 8081, targetPort: 8081}
`

// udpHost sends one datagram from the host to addr and returns the answer.
func udpHost(addr, msg string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// TestHostPublisherUDPAndLocal: a LoadBalancer with TCP and UDP ports and
// externalTrafficPolicy Local, its one pod on one of three nodes. Every request from
// the host reaches the pod, TCP and UDP: the publisher sends them only to the pod's
// node (the others' proxies drop Local traffic they have no endpoint for).
func TestHostPublisherUDPAndLocal(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, localUDPApp, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	c.waitReady(t, ns, "netexec")
	var ip string
	eventually(t, 30*time.Second, "netexec gets an EXTERNAL-IP", func() (bool, string) {
		out, _, _ := s.kubectl(t, "", "get", "svc", "netexec", "-n", ns, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		ip = out
		return strings.HasPrefix(ip, "127.0.10."), out
	})
	eventually(t, 30*time.Second, "UDP "+ip+":8081 answers from the host", func() (bool, string) {
		got, err := udpHost(ip+":8081", "hostname")
		return got == "netexec", fmt.Sprintf("%q %v", got, err)
	})
	for i := range 10 {
		if got, err := udpHost(ip+":8081", "hostname"); got != "netexec" {
			t.Fatalf("UDP request %d: %q %v", i, got, err)
		}
		if out, code := curlHost("http://" + ip + ":8080/hostname"); code != 0 || !strings.HasSuffix(out, "\r\n\r\nnetexec") {
			t.Fatalf("TCP request %d: curl exit %d:\n%s", i, code, out)
		}
	}
}

const secondClusterApp = `apiVersion: v1
kind: Pod
metadata: {name: here, labels: {app: here}}
spec:
  containers: [{name: c, image: registry.k8s.io/e2e-test-images/agnhost:2.52, args: [echo, --port=80], ports: [{containerPort: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: here}
spec: {selector: {app: here}, ports: [{port: 80, targetPort: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: here}
spec:
  rules:
  - host: here.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: here, port: {number: 80}}}}
`

// TestTwoClustersShareTheHost: a second `tranche up` on the machine draws from the same
// default pool as the first, but its tranche-ingress gets an address whose ports the
// first cluster (or any other program) does not hold, so requests to it reach the
// second cluster's Ingress, not the first one's. (Both taking 127.0.10.1, only one
// could listen, and TestIngressSeed003 talked to another cluster when several ran.)
func TestTwoClustersShareTheHost(t *testing.T) {
	first := up(t)
	firstIP := ingressAddress(t, first.srv)
	second := upOwn(t, "tl", 1)
	s := second.srv
	ns := s.namespace(t)
	if _, errOut, err := s.kubectl(t, secondClusterApp, "apply", "-n", ns, "-f", "-"); err != nil {
		t.Fatalf("apply: %v %s", err, errOut)
	}
	ip := ingressAddress(t, s)
	if ip == firstIP {
		t.Fatalf("both clusters' tranche-ingress got %s", ip)
	}
	eventually(t, 60*time.Second, "http://here.example.com/ through "+ip+" answered by the second cluster's pod", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "curl", "-sS", "-m", "5", "--resolve", "here.example.com:80:"+ip, "http://here.example.com/").CombinedOutput()
		return err == nil && strings.TrimSpace(string(out)) == "GET / from here", string(out)
	})
	out, _, _ := s.kubectl(t, "", "get", "events", "-n", "kube-system", "--field-selector", "involvedObject.name=tranche-ingress,reason=PublishFailed")
	if strings.Contains(out, ip) {
		t.Errorf("the second cluster's publisher could not listen on its own address:\n%s", out)
	}
}
