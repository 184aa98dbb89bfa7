// Package bootstraptoken holds bootstrap tokens as kubeadm makes them (Secret
// bootstrap-token-<id> in kube-system) and the discovery a joining node does with one:
// the kube-public/cluster-info ConfigMap, its JWS signatures and the CA public key pin.
package bootstraptoken

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstrapsecrets "k8s.io/cluster-bootstrap/util/secrets"
)

// DefaultGroup is the extra group kubeadm gives the tokens it makes for nodes; the
// bootstrap RBAC lets it create node CSRs and have them approved.
const DefaultGroup = "system:bootstrappers:kubeadm:default-node-token"

// DefaultTTL is kubeadm's default token lifetime.
const DefaultTTL = 24 * time.Hour

var tokenRE = regexp.MustCompile(`^([a-z0-9]{6})\.([a-z0-9]{16})$`)

// Token is a bootstrap token: ID (6 characters, public) and Secret (16 characters).
type Token struct {
	ID, Secret string
}

// String is the token as users pass it: <id>.<secret>.
func (t Token) String() string { return t.ID + "." + t.Secret }

// Generate makes a random token.
func Generate() (Token, error) {
	s, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return Token{}, err
	}
	return Parse(s)
}

// Parse reads "<id>.<secret>" ([a-z0-9]{6}.[a-z0-9]{16}).
func Parse(s string) (Token, error) {
	m := tokenRE.FindStringSubmatch(s)
	if m == nil {
		return Token{}, fmt.Errorf("token %q is not of the form [a-z0-9]{6}.[a-z0-9]{16}", redact(s))
	}
	return Token{ID: m[1], Secret: m[2]}, nil
}

// redact keeps a malformed token's secret part out of messages.
func redact(s string) string {
	if id, _, ok := strings.Cut(s, "."); ok {
		return id + ".<redacted>"
	}
	if len(s) > 6 {
		return s[:6] + "<redacted>"
	}
	return s
}

// Options are what a new token's Secret says beyond the token.
type Options struct {
	// TTL is the lifetime from Now; 0 means the token never expires.
	TTL         time.Duration
	Description string
	// Groups are the auth-extra-groups (DefaultGroup when nil).
	Groups []string
	Now    time.Time
}

// Secret is the kube-system Secret that makes t valid for authentication and for
// signing cluster-info, as `kubeadm token create` writes it.
func Secret(t Token, o Options) *v1.Secret {
	groups := o.Groups
	if groups == nil {
		groups = []string{DefaultGroup}
	}
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:                          []byte(t.ID),
		bootstrapapi.BootstrapTokenSecretKey:                      []byte(t.Secret),
		bootstrapapi.BootstrapTokenUsagePrefix + "authentication": []byte("true"),
		bootstrapapi.BootstrapTokenUsagePrefix + "signing":        []byte("true"),
		bootstrapapi.BootstrapTokenExtraGroupsKey:                 []byte(strings.Join(groups, ",")),
	}
	if o.TTL > 0 {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(o.Now.Add(o.TTL).UTC().Format(time.RFC3339))
	}
	if o.Description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(o.Description)
	}
	return &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstraputil.BootstrapTokenSecretName(t.ID), Namespace: metav1.NamespaceSystem},
		Type:       bootstrapapi.SecretTypeBootstrapToken,
		Data:       data,
	}
}

// Info is a token as `tranche token list` shows it (never its secret).
type Info struct {
	ID          string
	Expires     *time.Time
	Usages      []string
	Description string
	Groups      []string
}

// FromSecret reads a bootstrap token Secret; ok is false when s is not one.
func FromSecret(s *v1.Secret) (Info, bool) {
	if s.Type != bootstrapapi.SecretTypeBootstrapToken {
		return Info{}, false
	}
	id := bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenIDKey)
	if name, ok := bootstrapsecrets.ParseName(s.Name); !ok || name != id {
		return Info{}, false
	}
	info := Info{ID: id, Description: bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenDescriptionKey)}
	if exp := bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenExpirationKey); exp != "" {
		if t, err := time.Parse(time.RFC3339, exp); err == nil {
			info.Expires = &t
		}
	}
	for k, v := range s.Data {
		if u, ok := strings.CutPrefix(k, bootstrapapi.BootstrapTokenUsagePrefix); ok && string(v) == "true" {
			info.Usages = append(info.Usages, u)
		}
	}
	sort.Strings(info.Usages)
	if g := bootstrapsecrets.GetData(s, bootstrapapi.BootstrapTokenExtraGroupsKey); g != "" {
		info.Groups = strings.Split(g, ",")
	}
	return info, true
}
