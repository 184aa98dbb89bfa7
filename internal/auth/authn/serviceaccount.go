package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	jose "gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/jwt"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// DefaultIssuer is the "iss" of service account tokens, Kubernetes' default.
const DefaultIssuer = "https://kubernetes.default.svc.cluster.local"

// Extra keys a service account user carries, as Kubernetes names them.
const (
	ExtraCredentialID = "authentication.kubernetes.io/credential-id"
	ExtraPodName      = "authentication.kubernetes.io/pod-name"
	ExtraPodUID       = "authentication.kubernetes.io/pod-uid"
	ExtraNodeName     = "authentication.kubernetes.io/node-name"
	ExtraNodeUID      = "authentication.kubernetes.io/node-uid"
)

const (
	// defaultExpiration is the lifetime of a token requested without one (the
	// TokenRequest default of 3600 seconds).
	defaultExpiration = time.Hour
)

// ServiceAccountGetter looks up service accounts for token verification.
type ServiceAccountGetter interface {
	// GetServiceAccountUID returns the uid of namespace/name, found false when it does
	// not exist.
	GetServiceAccountUID(namespace, name string) (uid string, found bool, err error)
}

// PodGetter looks up pods for tokens bound to a pod.
type PodGetter interface {
	// GetPodUID returns the uid of namespace/name, found false when it does not exist.
	GetPodUID(namespace, name string) (uid string, found bool, err error)
}

// NodeGetter looks up nodes for tokens bound to a node.
type NodeGetter interface {
	// GetNodeUID returns the uid of the node, found false when it does not exist.
	GetNodeUID(name string) (uid string, found bool, err error)
}

// ObjectRef names an object a token is bound to.
type ObjectRef struct {
	Name, UID string
}

// BoundObject is what a token is bound to: it stops being valid when that object is
// deleted. A pod-bound token usually names the pod's node as well.
type BoundObject struct {
	Pod  *ObjectRef
	Node *ObjectRef
}

// Issuer signs service account tokens (the serviceaccounts/token subresource and
// `kubectl create token`).
type Issuer struct {
	signer jose.Signer
	issuer string
	// pub and kid are the verifying key and its id, published by OIDC discovery.
	pub *ecdsa.PublicKey
	kid string
	// now is the clock; tests replace it.
	now func() time.Time
}

// NewIssuer returns an issuer signing with key, which must be an ECDSA P-256 key,
// and putting issuer ("" means DefaultIssuer) in the "iss" claim.
func NewIssuer(key crypto.Signer, issuer string) (*Issuer, error) {
	if key == nil {
		return nil, errors.New("service account issuer: no signing key")
	}
	pub, ok := key.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("service account issuer: signing key must be ECDSA P-256 for ES256, got %T", key.Public())
	}
	kid, err := keyID(pub)
	if err != nil {
		return nil, fmt.Errorf("service account issuer: %w", err)
	}
	signer, err := newES256Signer(key, kid)
	if err != nil {
		return nil, fmt.Errorf("service account issuer: %w", err)
	}
	if issuer == "" {
		issuer = DefaultIssuer
	}
	return &Issuer{signer: signer, issuer: issuer, pub: pub, kid: kid, now: time.Now}, nil
}

// Issue returns a token for service account namespace/name with the given uid, valid
// for the audiences (none means the issuer itself) during expiration (zero means one
// hour), optionally bound to a pod or node, and its expiry time.
func (i *Issuer) Issue(namespace, name, uid string, audiences []string, expiration time.Duration, bound *BoundObject) (string, time.Time, error) {
	if namespace == "" || name == "" || uid == "" {
		return "", time.Time{}, fmt.Errorf("issuing token for service account %s/%s: namespace, name and uid are required", namespace, name)
	}
	if expiration < 0 {
		return "", time.Time{}, fmt.Errorf("issuing token for service account %s/%s: negative expiration %v", namespace, name, expiration)
	}
	if expiration == 0 {
		expiration = defaultExpiration
	}
	if len(audiences) == 0 {
		audiences = []string{i.issuer}
	}
	now := i.now().Truncate(time.Second)
	exp := now.Add(expiration)
	public := &jwt.Claims{
		Issuer:    i.issuer,
		Subject:   ServiceAccountUsername(namespace, name),
		Audience:  slices.Clone(audiences),
		Expiry:    jwt.NewNumericDate(exp),
		NotBefore: jwt.NewNumericDate(now),
		IssuedAt:  jwt.NewNumericDate(now),
		ID:        string(uuid.NewUUID()),
	}
	private := &privateClaims{Kubernetes: &kubernetesClaims{
		Namespace:      namespace,
		ServiceAccount: &objectRef{Name: name, UID: uid},
	}}
	if bound != nil {
		if bound.Pod != nil {
			private.Kubernetes.Pod = &objectRef{Name: bound.Pod.Name, UID: bound.Pod.UID}
		}
		if bound.Node != nil {
			private.Kubernetes.Node = &objectRef{Name: bound.Node.Name, UID: bound.Node.UID}
		}
	}
	token, err := signToken(i.signer, public, private)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issuing token for service account %s/%s: %w", namespace, name, err)
	}
	return token, exp, nil
}

// ServiceAccountTokens authenticates service account tokens made by an Issuer: it
// checks the signature, the times (with a minute's leeway), the audience, and that the
// service account (and the pod or node the token is bound to) still exists with the
// uid in the token, so deleting and recreating an account invalidates its tokens.
type ServiceAccountTokens struct {
	// Issuer is the expected "iss"; empty means DefaultIssuer. Tokens from other
	// issuers get no answer, so another authenticator may take them.
	Issuer string
	// Keys verify signatures; several allow key rotation. Only ECDSA P-256 keys are
	// used.
	Keys []crypto.PublicKey
	// Audiences are the accepted audiences; empty means the issuer.
	Audiences []string
	// Accounts is required. Pods and Nodes are optional; without them, bindings to
	// pods or nodes are not checked.
	Accounts ServiceAccountGetter
	Pods     PodGetter
	Nodes    NodeGetter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var (
	_ Authenticator      = (*ServiceAccountTokens)(nil)
	_ TokenAuthenticator = (*ServiceAccountTokens)(nil)
)

// Authenticate implements Authenticator for "Authorization: Bearer" requests.
func (s *ServiceAccountTokens) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := BearerToken(r)
	if !ok {
		return nil, false, nil
	}
	return s.AuthenticateToken(token)
}

// AuthenticateToken implements TokenAuthenticator.
func (s *ServiceAccountTokens) AuthenticateToken(token string) (*User, bool, error) {
	parsed, err := parseJWT(token)
	if err != nil {
		// Not a JWT at all: maybe a static token.
		return nil, false, nil
	}
	issuer := s.Issuer
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if parsed.issuer != issuer {
		return nil, false, nil
	}
	user, err := s.verify(parsed, issuer)
	if err != nil {
		return nil, false, err
	}
	return user, true, nil
}

func (s *ServiceAccountTokens) verify(p *parsedJWT, issuer string) (*User, error) {
	keys := make([]*ecdsa.PublicKey, 0, len(s.Keys))
	for _, k := range s.Keys {
		if ec, ok := k.(*ecdsa.PublicKey); ok {
			keys = append(keys, ec)
		}
	}
	c, private, err := p.verifyES256(keys)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	if c.Expiry == nil {
		return nil, errors.New("service account token has no expiry")
	}
	// The times are checked with jwt.DefaultLeeway (a minute), as in Kubernetes, and
	// its errors worded as Kubernetes words them.
	switch err := c.Validate(jwt.Expected{Time: now}); {
	case err == nil:
	case errors.Is(err, jwt.ErrExpired):
		return nil, errors.New("service account token has expired")
	case errors.Is(err, jwt.ErrNotValidYet):
		return nil, errors.New("service account token is not valid yet")
	case errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, errors.New("service account token is issued in the future")
	default:
		return nil, fmt.Errorf("service account token claims could not be validated: %w", err)
	}
	accepted := s.Audiences
	if len(accepted) == 0 {
		accepted = []string{issuer}
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(accepted, a) }) {
		return nil, fmt.Errorf("token audiences %q is invalid for the target audiences %q", []string(c.Audience), accepted)
	}
	k := private.Kubernetes
	if k == nil || k.ServiceAccount == nil || k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "" {
		return nil, errors.New("service account token lacks the kubernetes.io namespace and service account claims")
	}
	namespace, name := k.Namespace, k.ServiceAccount.Name
	if c.Subject != ServiceAccountUsername(namespace, name) {
		return nil, fmt.Errorf("service account token subject %q does not match its kubernetes.io claims", c.Subject)
	}
	if s.Accounts == nil {
		return nil, errors.New("service account tokens cannot be checked: no service account getter")
	}
	uid, found, err := s.Accounts.GetServiceAccountUID(namespace, name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("looking up service account %s/%s: %w", namespace, name, err)
	case !found:
		return nil, fmt.Errorf("service account %s/%s has been deleted", namespace, name)
	case uid != k.ServiceAccount.UID:
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", uid, k.ServiceAccount.UID)
	}
	user := &User{
		Name:   c.Subject,
		UID:    uid,
		Groups: ServiceAccountGroups(namespace),
		Extra:  map[string][]string{},
	}
	if c.ID != "" {
		user.Extra[ExtraCredentialID] = []string{"JTI=" + c.ID}
	}
	if pod := k.Pod; pod != nil {
		if err := checkBound(s.Pods != nil, "pod "+namespace+"/"+pod.Name, pod.UID, func() (string, bool, error) {
			return s.Pods.GetPodUID(namespace, pod.Name)
		}); err != nil {
			return nil, err
		}
		user.Extra[ExtraPodName] = []string{pod.Name}
		user.Extra[ExtraPodUID] = []string{pod.UID}
	}
	if node := k.Node; node != nil {
		// A pod-bound token names the pod's node for information only (its uid may be
		// empty when the node could not be read at issue time); only a token bound to
		// the node itself depends on the node's existence.
		if k.Pod == nil {
			if err := checkBound(s.Nodes != nil, "node "+node.Name, node.UID, func() (string, bool, error) {
				return s.Nodes.GetNodeUID(node.Name)
			}); err != nil {
				return nil, err
			}
		}
		user.Extra[ExtraNodeName] = []string{node.Name}
		if node.UID != "" {
			user.Extra[ExtraNodeUID] = []string{node.UID}
		}
	}
	if len(user.Extra) == 0 {
		user.Extra = nil
	}
	return user, nil
}

// checkBound verifies that the object a token is bound to still exists with the uid
// in the token; without a getter (enabled false) the binding is taken on trust.
func checkBound(enabled bool, what, claimUID string, get func() (string, bool, error)) error {
	if !enabled {
		return nil
	}
	uid, found, err := get()
	switch {
	case err != nil:
		return fmt.Errorf("looking up %s: %w", what, err)
	case !found:
		return fmt.Errorf("%s has been deleted", what)
	case uid != claimUID:
		return fmt.Errorf("%s UID (%s) does not match claim (%s)", what, uid, claimUID)
	}
	return nil
}
