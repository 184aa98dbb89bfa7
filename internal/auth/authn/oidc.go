package authn

import (
	"encoding/json"
	"fmt"

	jose "gopkg.in/go-jose/go-jose.v2"
)

// The paths of the service account issuer's OIDC discovery documents, as
// kube-apiserver serves them.
const (
	OpenIDConfigPath = "/.well-known/openid-configuration"
	JWKSPath         = "/openid/v1/jwks"
)

// openIDMetadata is the OIDC provider configuration kube-apiserver publishes: only the
// fields OIDC requires, as service account tokens are ID tokens of the issuer.
type openIDMetadata struct {
	Issuer        string   `json:"issuer"`
	JWKSURI       string   `json:"jwks_uri"`
	ResponseTypes []string `json:"response_types_supported"`
	SubjectTypes  []string `json:"subject_types_supported"`
	SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
}

// OIDCDiscovery returns the issuer's OpenID provider configuration and its JSON Web
// Key Set, the documents served at OpenIDConfigPath and JWKSPath, so that a relying
// party (an OIDC library) can verify service account tokens. The jwks_uri is the
// issuer URL with JWKSPath, reachable from pods where the issuer names the in-cluster
// API server.
func (i *Issuer) OIDCDiscovery() (config, keys []byte, err error) {
	jwk := jose.JSONWebKey{Key: i.pub, KeyID: i.kid, Algorithm: string(jose.ES256), Use: "sig"}
	if !jwk.Valid() || !jwk.IsPublic() {
		return nil, nil, fmt.Errorf("service account issuer: key %s is not a valid public key", i.kid)
	}
	keys, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{jwk}})
	if err != nil {
		return nil, nil, fmt.Errorf("service account issuer: encoding the key set: %w", err)
	}
	config, err = json.Marshal(openIDMetadata{
		Issuer:        i.issuer,
		JWKSURI:       i.issuer + JWKSPath,
		ResponseTypes: []string{"id_token"},
		SubjectTypes:  []string{"public"},
		SigningAlgs:   []string{string(jose.ES256)},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("service account issuer: encoding the discovery document: %w", err)
	}
	return config, keys, nil
}
