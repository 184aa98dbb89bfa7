package authn

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// A compact-serialised JWS with one algorithm, ES256, which is all service account
// tokens need. Written here rather than imported to keep the dependency set fixed.

// es256Size is the byte length of each of R and S in an ES256 signature.
const es256Size = 32

// maxTokenSize bounds what is decoded from a request header.
const maxTokenSize = 16 << 10

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid,omitempty"`
	Typ string `json:"typ,omitempty"`
}

// tokenClaims are the claims of a Kubernetes bound service account token.
type tokenClaims struct {
	Issuer     string            `json:"iss,omitempty"`
	Subject    string            `json:"sub,omitempty"`
	Audience   audience          `json:"aud,omitempty"`
	Expiry     *int64            `json:"exp,omitempty"`
	NotBefore  *int64            `json:"nbf,omitempty"`
	IssuedAt   *int64            `json:"iat,omitempty"`
	ID         string            `json:"jti,omitempty"`
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

// audience is the "aud" claim, which RFC 7519 allows as a string or an array.
type audience []string

func (a *audience) UnmarshalJSON(data []byte) error {
	var one string
	if err := json.Unmarshal(data, &one); err == nil {
		*a = audience{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return errors.New(`"aud" must be a string or an array of strings`)
	}
	*a = many
	return nil
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

// signES256 returns the compact JWS of claims signed with key.
func signES256(key crypto.Signer, kid string, claims *tokenClaims) (string, error) {
	header, err := json.Marshal(jwtHeader{Alg: "ES256", Kid: kid})
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	input := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(input))
	der, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("signing token: %w", err)
	}
	// crypto.Signer gives ASN.1 DER; JWS wants the fixed-size R || S.
	var sig struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(der, &sig); err != nil || len(rest) > 0 {
		return "", fmt.Errorf("signing token: unexpected signature encoding")
	}
	raw := make([]byte, 2*es256Size)
	sig.R.FillBytes(raw[:es256Size])
	sig.S.FillBytes(raw[es256Size:])
	return input + "." + base64.RawURLEncoding.EncodeToString(raw), nil
}

// parsedJWT is a token split and decoded, its signature not yet checked.
type parsedJWT struct {
	header    jwtHeader
	claims    tokenClaims
	input     []byte
	signature []byte
}

// parseJWT decodes a compact JWS without verifying it. It never panics.
func parseJWT(token string) (*parsedJWT, error) {
	if len(token) > maxTokenSize {
		return nil, errors.New("token is too large")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errors.New("token is not a compact JWS (three dot-separated parts)")
	}
	headerJSON, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, fmt.Errorf("decoding token header: %w", err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("decoding token payload: %w", err)
	}
	signature, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, fmt.Errorf("decoding token signature: %w", err)
	}
	p := &parsedJWT{input: []byte(parts[0] + "." + parts[1]), signature: signature}
	if err := strictUnmarshal(headerJSON, &p.header); err != nil {
		return nil, fmt.Errorf("decoding token header: %w", err)
	}
	if err := json.Unmarshal(payload, &p.claims); err != nil {
		return nil, fmt.Errorf("decoding token claims: %w", err)
	}
	return p, nil
}

// strictUnmarshal rejects headers with parameters we do not implement ("crit", "jku",
// ...), which a verifier must not ignore.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// verifyES256 checks p's signature against any of keys.
func (p *parsedJWT) verifyES256(keys []*ecdsa.PublicKey) error {
	if p.header.Alg != "ES256" {
		return fmt.Errorf("token signing algorithm %q is not supported", p.header.Alg)
	}
	if len(p.signature) != 2*es256Size {
		return errors.New("token signature has the wrong length for ES256")
	}
	r := new(big.Int).SetBytes(p.signature[:es256Size])
	s := new(big.Int).SetBytes(p.signature[es256Size:])
	digest := sha256.Sum256(p.input)
	for _, key := range keys {
		if key != nil && key.Curve == elliptic.P256() && ecdsa.Verify(key, digest[:], r, s) {
			return nil
		}
	}
	return errors.New("token signature is invalid")
}
