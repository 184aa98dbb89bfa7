package server

import (
	"net/http"

	"github.com/tranche/tranche/internal/auth/authn"
)

// inFlightExempt reports the requests kube-apiserver serves even over its in-flight
// limits: those of system:masters, the super-admin and the server's own loopback
// clients, which must always get an answer.
func inFlightExempt(r *http.Request) bool {
	return userFrom(r.Context()).InGroup(authn.GroupMasters)
}
