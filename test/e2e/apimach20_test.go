package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// conversionWebhookPod runs upstream's agnhost `crd-conversion-webhook` (the conformance
// specs' converter: stable.example.com v1 hostPort "h:p" <-> v2 host and port) with a
// certificate for its Service, as test/e2e/apimachinery/crd_conversion_webhook.go does.
const conversionWebhookPod = `apiVersion: v1
kind: Pod
metadata:
  name: sample-crd-conversion-webhook
  labels: {app: sample-crd-conversion-webhook}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: sample-crd-conversion-webhook
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["crd-conversion-webhook", "--tls-cert-file=/webhook.local.config/certificates/tls.crt",
      "--tls-private-key-file=/webhook.local.config/certificates/tls.key", "-v=4", "--port=9444"]
    ports: [{containerPort: 9444}]
    readinessProbe:
      httpGet: {scheme: HTTPS, port: 9444, path: /readyz}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /webhook.local.config/certificates, readOnly: true}]
  volumes:
  - name: certs
    secret: {secretName: conversion-webhook-certs}
---
apiVersion: v1
kind: Service
metadata:
  name: e2e-test-crd-conversion-webhook
spec:
  selector: {app: sample-crd-conversion-webhook}
  ports: [{port: 9443, targetPort: 9444}]
`

// conversionCRD is a definition in agnhost's group stable.example.com, named after ns
// (definitions are cluster-wide), with v1 (hostPort, the storage version) and v2 (host,
// port), each with a selectable field, converted by the webhook's Service.
func conversionCRD(ns, plural, kind, caBundle string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s.stable.example.com}
spec:
  group: stable.example.com
  scope: Namespaced
  names: {plural: %[1]s, singular: %[1]s, kind: %[2]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {hostPort: {type: string}}}}
    selectableFields: [{jsonPath: .hostPort}]
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, properties: {host: {type: string}, port: {type: string}}}}
    selectableFields: [{jsonPath: .host}, {jsonPath: .port}]
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1, v1beta1]
      clientConfig:
        caBundle: %[3]s
        service: {namespace: %[4]s, name: e2e-test-crd-conversion-webhook, path: /crdconvert, port: 9443}
`, plural, kind, caBundle, ns)
}

// TestCRDConversionWebhook: a definition whose conversion strategy is Webhook has its
// objects converted by agnhost's crd-conversion-webhook, in a pod behind a Service
// reference with a path and port, trusted through the caBundle: an object created as v2
// reads as v1 with kubectl, a list of objects stored in both versions reads all of them
// converted, a field selector of the other version's selectable field selects converted
// objects in lists and watches, and a definition whose webhook has no endpoints fails
// reads with the conversion's error.
func TestCRDConversionWebhook(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)
	h := fnv.New32a()
	h.Write([]byte(ns))
	suffix := fmt.Sprintf("%08x", h.Sum32())
	plural, kind := "conv"+suffix, "Conv"+suffix
	dir := t.TempDir()
	ca, err := os.ReadFile(writeTestCertificates(t, dir, "e2e-test-crd-conversion-webhook."+ns+".svc"))
	if err != nil {
		t.Fatal(err)
	}
	caBundle := base64.StdEncoding.EncodeToString(ca)
	s.must(t, "create", "secret", "tls", "conversion-webhook-certs", "-n", ns,
		"--cert="+filepath.Join(dir, "tls.crt"), "--key="+filepath.Join(dir, "tls.key"))
	c.apply(t, ns, conversionWebhookPod)
	c.waitReady(t, ns, "sample-crd-conversion-webhook")
	crdName := plural + ".stable.example.com"
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "crd", crdName, "--ignore-not-found", "--wait=false") })
	c.apply(t, "", conversionCRD(ns, plural, kind, caBundle))
	waitEstablished(t, s, crdName)

	object := func(version, name string, fields string) string {
		return fmt.Sprintf("apiVersion: stable.example.com/%s\nkind: %s\nmetadata: {name: %s}\n%s\n", version, kind, name, fields)
	}
	// The served resources appear a moment after Established.
	eventually(t, 30*time.Second, "a v1 object created", func() (bool, string) {
		out, errOut, err := s.kubectl(t, object("v1", "one", "hostPort: host1:80"), "create", "-n", ns, "-f", "-")
		return err == nil, out + errOut
	})

	dyn := dynamic.NewForConfigOrDie(s.restConfig(t))
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v2", Resource: plural}).Namespace(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := v2.Watch(ctx, metav1.ListOptions{FieldSelector: "host=host2"})
	if err != nil {
		t.Fatalf("v2 watch with host=host2: %v", err)
	}
	defer w.Stop()

	s.mustStdin(t, object("v2", "two", "host: host2\nport: \"8080\""), "create", "-n", ns, "-f", "-")
	if got := s.must(t, "get", plural+".v1.stable.example.com", "two", "-n", ns, "-o", "jsonpath={.apiVersion} {.hostPort} {.host}"); got != "stable.example.com/v1 host2:8080 " {
		t.Errorf("v2 object read as v1: %q, want %q", got, "stable.example.com/v1 host2:8080 ")
	}
	got := s.must(t, "get", plural+".v2.stable.example.com", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.apiVersion},{.host},{.port} {end}`)
	if want := "one=stable.example.com/v2,host1,80 two=stable.example.com/v2,host2,8080 "; got != want {
		t.Errorf("v2 list of objects written as v1 and v2: %q, want %q", got, want)
	}
	got = s.must(t, "get", plural+".v1.stable.example.com", "-n", ns, "--field-selector", "hostPort=host2:8080", "-o", "name")
	if want := plural + ".stable.example.com/two\n"; got != want {
		t.Errorf("v1 list with hostPort=host2:8080: %q, want %q", got, want)
	}
	got = s.must(t, "get", plural+".v2.stable.example.com", "-n", ns, "--field-selector", "host=host1,port=80", "-o", "name")
	if want := plural + ".stable.example.com/one\n"; got != want {
		t.Errorf("v2 list with host=host1,port=80: %q, want %q", got, want)
	}
	select {
	case ev := <-w.ResultChan():
		u, _ := ev.Object.(*unstructured.Unstructured)
		if ev.Type != watch.Added || u == nil || u.GetName() != "two" || u.Object["port"] != "8080" {
			t.Errorf("v2 watch with host=host2: got %v %v", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("v2 watch with host=host2 saw nothing")
	}

	// Without endpoints the webhook cannot be called: reads in the other version fail
	// with the conversion's error, as kube-apiserver's do.
	s.must(t, "delete", "pod", "sample-crd-conversion-webhook", "-n", ns, "--wait=true")
	eventually(t, 30*time.Second, "a v2 read failing without the webhook", func() (bool, string) {
		_, errOut, err := s.kubectl(t, "", "get", plural+".v2.stable.example.com", "one", "-n", ns)
		return err != nil && strings.Contains(errOut, "conversion webhook for stable.example.com/v1, Kind="+kind+" failed"), errOut
	})
}

// TestAPIServices: apiregistration.k8s.io/v1 APIServices are served and listed in
// discovery and aggregated discovery; every built-in group version has a Local one with
// kube-apiserver's priorities, Available because it is local; a custom resource's group
// version gets one while its definition exists; one backed by a missing Service is
// unavailable with kube-aggregator's reason, shown in kubectl's table.
func TestAPIServices(t *testing.T) {
	c := up(t)
	s := c.srv
	ns := s.namespace(t)

	if got := s.must(t, "api-resources", "--api-group=apiregistration.k8s.io", "-o", "name"); got != "apiservices.apiregistration.k8s.io\n" {
		t.Errorf("api-resources of apiregistration.k8s.io: %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raw, err := s.client(t).Discovery().RESTClient().Get().AbsPath("/apis").
		SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").Do(ctx).Raw()
	if err != nil || !strings.Contains(string(raw), `"resource":"apiservices"`) {
		t.Errorf("aggregated discovery lacks apiservices: %v", err)
	}

	jsonpath := `jsonpath={.spec.groupPriorityMinimum} {.spec.versionPriority} {.metadata.labels.kube-aggregator\.kubernetes\.io/automanaged} {.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].reason}`
	for name, want := range map[string]string{
		"v1.":                     "18000 1 onstart True Local",
		"v1.apps":                 "17800 15 onstart True Local",
		"v2.autoscaling":          "17500 30 onstart True Local",
		"v1.apiextensions.k8s.io": "16700 15 onstart True Local",
	} {
		eventually(t, 30*time.Second, "APIService "+name, func() (bool, string) {
			out, errOut, err := s.kubectl(t, "", "get", "apiservice", name, "-o", jsonpath)
			return err == nil && out == want, out + errOut
		})
	}

	group := ns + ".example.com"
	t.Cleanup(func() {
		_, _, _ = s.kubectl(t, "", "delete", "crd", "crontabs."+group, "--ignore-not-found", "--wait=false")
	})
	c.apply(t, "", crdManifest(group))
	eventually(t, 30*time.Second, "the definition's APIService", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "apiservice", "v1."+group, "-o", jsonpath)
		return err == nil && out == "1000 100 true True Local", out + errOut
	})
	s.must(t, "delete", "crd", "crontabs."+group)
	eventually(t, 30*time.Second, "the definition's APIService removed", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "apiservice", "v1."+group)
		return err != nil && strings.Contains(errOut, "NotFound"), out + errOut
	})

	name := "v1alpha1." + group
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "apiservice", name, "--ignore-not-found") })
	c.apply(t, "", fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s}
spec:
  group: %s
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 200
  insecureSkipTLSVerify: true
  service: {namespace: %s, name: missing, port: 443}
`, name, group, ns))
	eventually(t, 30*time.Second, "an APIService without its Service unavailable", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "apiservice", name, "--no-headers")
		f := strings.Fields(out)
		return err == nil && len(f) >= 4 && f[1] == ns+"/missing" && f[2]+" "+f[3] == "False (ServiceNotFound)", out + errOut
	})
	// A name that is not version.group is refused with kube-aggregator's message.
	_, errOut, err := s.kubectl(t, "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: wrong}\n"+
		"spec: {group: "+group+", version: v1, groupPriorityMinimum: 100, versionPriority: 10}\n", "create", "-f", "-")
	if err == nil || !strings.Contains(errOut, `metadata.name: Invalid value: "wrong": must be `+"`spec.version+\".\"+spec.group`") {
		t.Errorf("APIService with a wrong name: %v %s", err, errOut)
	}
}

// extensionServerPod is a stand-in extension API server: agnhost netexec over TLS with
// a certificate for its Service, answering every path (its root handler's "NOW: ...").
const extensionServerPod = `apiVersion: v1
kind: Pod
metadata:
  name: extension-server
  labels: {app: extension-server}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: registry.k8s.io/e2e-test-images/agnhost:2.53
    args: ["netexec", "--http-port=8443", "--tls-cert-file=/certs/tls.crt", "--tls-private-key-file=/certs/tls.key"]
    ports: [{containerPort: 8443}]
    readinessProbe:
      httpGet: {scheme: HTTPS, port: 8443, path: /}
      periodSeconds: 1
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
  volumes:
  - name: certs
    secret: {secretName: extension-server-certs}
---
apiVersion: v1
kind: Service
metadata:
  name: extension-api
spec:
  selector: {app: extension-server}
  ports: [{port: 443, targetPort: 8443}]
`

// TestAggregatedAPIServiceProxy: an APIService backed by a Service, trusted through its
// caBundle, becomes Available once the server behind the Service answers its discovery
// path; requests below /apis/GROUP/VERSION are then proxied to a ready endpoint of the
// Service over TLS, the group is listed in /apis, and without endpoints the APIService
// turns unavailable and requests get kube-aggregator's 503 "service unavailable". On a
// cluster of its own: the stand-in server's discovery answers are not resource lists.
func TestAggregatedAPIServiceProxy(t *testing.T) {
	c := upOwn(t, "tam", 1)
	s := c.srv
	ns := s.namespace(t)
	dir := t.TempDir()
	ca, err := os.ReadFile(writeTestCertificates(t, dir, "extension-api."+ns+".svc"))
	if err != nil {
		t.Fatal(err)
	}
	s.must(t, "create", "secret", "tls", "extension-server-certs", "-n", ns,
		"--cert="+filepath.Join(dir, "tls.crt"), "--key="+filepath.Join(dir, "tls.key"))
	c.apply(t, ns, extensionServerPod)
	c.waitReady(t, ns, "extension-server")

	group := ns + ".example.com"
	name := "v1alpha1." + group
	t.Cleanup(func() { _, _, _ = s.kubectl(t, "", "delete", "apiservice", name, "--ignore-not-found") })
	c.apply(t, "", fmt.Sprintf(`apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: %s}
spec:
  group: %s
  version: v1alpha1
  groupPriorityMinimum: 2000
  versionPriority: 200
  caBundle: %s
  service: {namespace: %s, name: extension-api, port: 443}
`, name, group, base64.StdEncoding.EncodeToString(ca), ns))
	eventually(t, 60*time.Second, "the APIService Available", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "apiservice", name, "--no-headers")
		f := strings.Fields(out)
		return err == nil && len(f) >= 3 && f[1] == ns+"/extension-api" && f[2] == "True", out + errOut
	})
	path := "/apis/" + group + "/v1alpha1/namespaces/default/flunders"
	if out := s.must(t, "get", "--raw", path); !strings.HasPrefix(out, "NOW: ") {
		t.Errorf("GET %s: %q, want the extension server's answer", path, out)
	}
	if out := s.must(t, "get", "--raw", "/apis"); !strings.Contains(out, `"name":"`+group+`"`) {
		t.Errorf("/apis lacks %s: %s", group, out)
	}

	s.must(t, "delete", "pod", "extension-server", "-n", ns, "--wait=true")
	eventually(t, 60*time.Second, "requests refused without endpoints", func() (bool, string) {
		out, errOut, err := s.kubectl(t, "", "get", "--raw", path)
		// kube-aggregator answers 503 with the text "service unavailable", which
		// kubectl reports as ServiceUnavailable.
		return err != nil && strings.Contains(errOut, "(ServiceUnavailable)"), out + errOut
	})
	out := s.must(t, "get", "apiservice", name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
	if out != "False" {
		t.Errorf("APIService without endpoints: Available %q", out)
	}
}

// TestListContinueAfterCompaction: a paged list whose first page's revision has been
// compacted away gets 410 Expired with a continue token in its Status; that token lists
// the remainder from the last key at the newest revision (an inconsistent list: an
// object created meanwhile shows up), as kube-apiserver does. On a cluster of its own
// compacting every 5 seconds.
func TestListContinueAfterCompaction(t *testing.T) {
	c := upOwn(t, "tlc", 1, "--compact-interval=5s")
	s := c.srv
	ns := s.namespace(t)
	cms := s.client(t).CoreV1().ConfigMaps(ns)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 25 {
		if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 10})
	if err != nil || len(first.Items) != 10 || first.Continue == "" {
		t.Fatalf("first page: %v, %d items, continue %q", err, len(first.Items), first.Continue)
	}
	if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-99"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token string
	eventually(t, 60*time.Second, "the first page's continue token expired", func() (bool, string) {
		_, err := cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: first.Continue})
		if err == nil {
			return false, "the token still lists"
		}
		st, ok := err.(apierrors.APIStatus)
		if !apierrors.IsResourceExpired(err) || !ok {
			return false, err.Error()
		}
		token = st.Status().Continue
		return token != "", fmt.Sprintf("410 with continue %q: %v", token, err)
	})
	var names []string
	var remaining []int
	opts := metav1.ListOptions{Limit: 10, Continue: token}
	for {
		page, err := cms.List(ctx, opts)
		if err != nil {
			t.Fatalf("continuing with the inconsistent token: %v", err)
		}
		if page.ResourceVersion == first.ResourceVersion {
			t.Errorf("a page after the inconsistent token has the first page's resourceVersion %s", first.ResourceVersion)
		}
		for _, cm := range page.Items {
			names = append(names, cm.Name)
		}
		if page.Continue == "" {
			break
		}
		if page.RemainingItemCount == nil {
			t.Fatalf("a page with a continue token lacks remainingItemCount")
		}
		remaining = append(remaining, len(names)+int(*page.RemainingItemCount))
		opts.Continue = page.Continue
	}
	// The namespace's kube-root-ca.crt sorts last.
	want := "cm-10 cm-11 cm-12 cm-13 cm-14 cm-15 cm-16 cm-17 cm-18 cm-19 cm-20 cm-21 cm-22 cm-23 cm-24 cm-99 kube-root-ca.crt"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("remainder: %s\nwant %s", got, want)
	}
	for _, n := range remaining {
		if n != len(names) {
			t.Errorf("items so far plus remainingItemCount: %v, want %d on every page", remaining, len(names))
			break
		}
	}
}
