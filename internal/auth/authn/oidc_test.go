package authn

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	jose "gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/jwt"
)

// TestOIDCDiscovery checks that the published documents let a relying party verify
// an issued token: the key set holds the signing key under the token's kid.
func TestOIDCDiscovery(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss, err := NewIssuer(key, "")
	if err != nil {
		t.Fatal(err)
	}
	config, keys, err := iss.OIDCDiscovery()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(config, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                DefaultIssuer,
		"jwks_uri":                              DefaultIssuer + "/openid/v1/jwks",
		"response_types_supported":              []any{"id_token"},
		"subject_types_supported":               []any{"public"},
		"id_token_signing_alg_values_supported": []any{"ES256"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("configuration (-want +got):\n%s", diff)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(keys, &set); err != nil {
		t.Fatal(err)
	}
	token, _, err := iss.Issue("ns", "sa", "uid", []string{"aud"}, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(token)
	if err != nil {
		t.Fatal(err)
	}
	kid := parsed.Headers[0].KeyID
	found := set.Key(kid)
	if len(found) != 1 || found[0].Use != "sig" || found[0].Algorithm != "ES256" {
		t.Fatalf("key set %s has no signing key %q", keys, kid)
	}
	var claims jwt.Claims
	if err := parsed.Claims(found[0].Key, &claims); err != nil {
		t.Errorf("token does not verify with the published key: %v", err)
	}
	if claims.Issuer != DefaultIssuer {
		t.Errorf("token issuer %q, want the published %q", claims.Issuer, DefaultIssuer)
	}
}
