package authn

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// StaticTokens authenticates bearer tokens from a fixed table, like Kubernetes'
// --token-auth-file; tranche uses it for node join tokens.
type StaticTokens struct {
	users map[string]*User
}

var (
	_ Authenticator      = (*StaticTokens)(nil)
	_ TokenAuthenticator = (*StaticTokens)(nil)
)

// NewStaticTokens returns an authenticator for the token → user table (copied).
func NewStaticTokens(tokens map[string]*User) *StaticTokens {
	users := make(map[string]*User, len(tokens))
	for token, user := range tokens {
		if token != "" && user != nil {
			users[token] = user
		}
	}
	return &StaticTokens{users: users}
}

// LoadStaticTokens reads a token file: CSV records `token,user,uid[,"group1,group2"]`,
// further columns ignored. Records with an empty token are skipped; a later record
// for the same token replaces the earlier one.
func LoadStaticTokens(path string) (*StaticTokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening token file %s: %w", path, err)
	}
	defer f.Close()
	tokens, err := ParseStaticTokens(f)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tokens, nil
}

// ParseStaticTokens reads token records in LoadStaticTokens' format from r.
func ParseStaticTokens(r io.Reader) (*StaticTokens, error) {
	reader := csv.NewReader(r)
	reader.FieldsPerRecord = -1
	reader.Comment = '#'
	users := map[string]*User{}
	for record := 1; ; record++ {
		fields, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(fields) < 3 {
			return nil, fmt.Errorf("record %d must have at least 3 columns (token, user name, user uid), found %d", record, len(fields))
		}
		if fields[0] == "" {
			continue
		}
		user := &User{Name: fields[1], UID: fields[2]}
		if len(fields) >= 4 && fields[3] != "" {
			user.Groups = strings.Split(fields[3], ",")
		}
		users[fields[0]] = user
	}
	return &StaticTokens{users: users}, nil
}

// Authenticate implements Authenticator for "Authorization: Bearer" requests.
func (s *StaticTokens) Authenticate(r *http.Request) (*User, bool, error) {
	token, ok := BearerToken(r)
	if !ok {
		return nil, false, nil
	}
	return s.AuthenticateToken(token)
}

// AuthenticateToken implements TokenAuthenticator. Unknown tokens get no answer, so
// that a Union can try the next authenticator.
func (s *StaticTokens) AuthenticateToken(token string) (*User, bool, error) {
	user, ok := s.users[token]
	if !ok {
		return nil, false, nil
	}
	out := *user
	return &out, true, nil
}
