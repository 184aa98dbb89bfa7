package authn

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	jose "gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/cryptosigner"
	"gopkg.in/go-jose/go-jose.v2/jwt"
)

// Service account tokens are compact JWS signed with ES256, made and checked with
// go-jose v2, the library kube-apiserver's serviceaccount package uses (and one already
// linked into the binary). The claims are those kube-apiserver writes: the registered
// ones in jwt.Claims and the private "kubernetes.io" claim.

// maxTokenSize bounds what is decoded from a request header.
const maxTokenSize = 16 << 10

// privateClaims is the "kubernetes.io" claim of a bound service account token.
type privateClaims struct {
	Kubernetes *kubernetesClaims `json:"kubernetes.io,omitempty"`
}

type kubernetesClaims struct {
	Namespace      string     `json:"namespace,omitempty"`
	ServiceAccount *objectRef `json:"serviceaccount,omitempty"`
	Pod            *objectRef `json:"pod,omitempty"`
	Node           *objectRef `json:"node,omitempty"`
}

type objectRef struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// keyID is the "kid" Kubernetes puts in its tokens: the unpadded base64url SHA-256 of
// the DER-encoded public key.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// newES256Signer returns a signer whose tokens carry kid in their header. An ECDSA
// private key signs directly; any other crypto.Signer (a key held elsewhere) through
// go-jose's adapter.
func newES256Signer(key crypto.Signer, kid string) (jose.Signer, error) {
	var k any = cryptosigner.Opaque(key)
	if ec, ok := key.(*ecdsa.PrivateKey); ok {
		k = ec
	}
	return jose.NewSigner(jose.SigningKey{
		Algorithm: jose.ES256,
		Key:       &jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"},
	}, nil)
}

// signToken returns the compact JWS of the claims.
func signToken(signer jose.Signer, public *jwt.Claims, private *privateClaims) (string, error) {
	token, err := jwt.Signed(signer).Claims(public).Claims(private).CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	return token, nil
}

// parsedJWT is a token split and decoded, its signature not yet checked.
type parsedJWT struct {
	tok *jwt.JSONWebToken
	// issuer is the unverified "iss", to tell our tokens from others'.
	issuer string
}

// parseJWT decodes a compact JWS without verifying it. It never panics.
func parseJWT(token string) (*parsedJWT, error) {
	if len(token) > maxTokenSize {
		return nil, errors.New("token is too large")
	}
	// go-jose would also take the JSON serialization; Kubernetes tokens are compact.
	if strings.Count(token, ".") != 2 {
		return nil, errors.New("token is not a compact JWS (three dot-separated parts)")
	}
	tok, err := jwt.ParseSigned(token)
	if err != nil {
		return nil, err
	}
	var unverified jwt.Claims
	if err := tok.UnsafeClaimsWithoutVerification(&unverified); err != nil {
		return nil, fmt.Errorf("decoding token claims: %w", err)
	}
	return &parsedJWT{tok: tok, issuer: unverified.Issuer}, nil
}

// verifyES256 checks p's signature against any of keys, the algorithm pinned to ES256,
// and returns its claims.
func (p *parsedJWT) verifyES256(keys []*ecdsa.PublicKey) (*jwt.Claims, *privateClaims, error) {
	if len(p.tok.Headers) != 1 {
		return nil, nil, errors.New("token must have exactly one signature")
	}
	if alg := p.tok.Headers[0].Algorithm; alg != string(jose.ES256) {
		return nil, nil, fmt.Errorf("token signing algorithm %q is not supported", alg)
	}
	for _, key := range keys {
		public, private := &jwt.Claims{}, &privateClaims{}
		if key != nil && p.tok.Claims(key, public, private) == nil {
			return public, private, nil
		}
	}
	return nil, nil, errors.New("token signature is invalid")
}
