package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/tranche/tranche/internal/auth/pki"
	"github.com/tranche/tranche/internal/testutil"
)

// TestExtensionAuthConfigMap: the server publishes kube-system/extension-apiserver-
// authentication with its cluster CA, its front-proxy CA and the front proxy's names
// and headers, as kube-apiserver does; it keeps the CA of another API server found in
// it, and writes the ConfigMap again when someone deletes it. It also creates the roles
// extension API servers are bound to.
func TestExtensionAuthConfigMap(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	fp, err := pki.EnsureFrontProxy(dir)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const ns, name = "kube-system", "extension-apiserver-authentication"
	client := kubefake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string]string{"client-ca-file": string(other.CertPEM)}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startExtensionAuth(ctx, client, ca.CertPEM, fp, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}

	jsonList := func(s ...string) string {
		b, _ := json.Marshal(s)
		return string(b)
	}
	want := map[string]string{
		"client-ca-file":                     string(other.CertPEM) + string(ca.CertPEM),
		"requestheader-client-ca-file":       string(fp.CA.CertPEM),
		"requestheader-allowed-names":        jsonList("front-proxy-client"),
		"requestheader-username-headers":     jsonList("X-Remote-User"),
		"requestheader-uid-headers":          jsonList("X-Remote-Uid"),
		"requestheader-group-headers":        jsonList("X-Remote-Group"),
		"requestheader-extra-headers-prefix": jsonList("X-Remote-Extra-"),
	}
	current := func() (bool, string) {
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		diff := cmp.Diff(want, cm.Data)
		return diff == "", "data (-want +got):\n" + diff
	}
	testutil.EventuallyState(t, 10*time.Second, "the ConfigMap holding both servers' client CAs and the front proxy's", current)

	if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want["client-ca-file"] = string(ca.CertPEM)
	testutil.EventuallyState(t, 10*time.Second, "the deleted ConfigMap written again", current)

	reader, err := client.RbacV1().Roles(ns).Get(ctx, "extension-apiserver-authentication-reader", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := reader.Rules; len(r) != 1 || strings.Join(r[0].ResourceNames, ",") != name || strings.Join(r[0].Verbs, ",") != "get,list,watch" {
		t.Errorf("extension-apiserver-authentication-reader rules %+v", r)
	}
	delegator, err := client.RbacV1().ClusterRoles().Get(ctx, "system:auth-delegator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range delegator.Rules {
		got = append(got, strings.Join(r.Verbs, ",")+" "+strings.Join(r.APIGroups, ",")+"/"+strings.Join(r.Resources, ","))
	}
	if diff := cmp.Diff([]string{"create authentication.k8s.io/tokenreviews", "create authorization.k8s.io/subjectaccessreviews"}, got); diff != "" {
		t.Errorf("system:auth-delegator rules (-want +got):\n%s", diff)
	}
}
