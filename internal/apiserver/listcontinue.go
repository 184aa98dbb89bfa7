package apiserver

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// latestRevision is the revision of a continue token that lists the remainder at the
// newest revision instead of the first page's: kube-apiserver's etcd3 store hands such a
// token out (with resourceVersion -1, so that it differs from a bad token without one)
// when the first page's revision has been compacted away.
const latestRevision = -1

// inconsistentContinue is kube-apiserver's message for a continue token whose revision
// was compacted; the Status carries a token that lists the rest at the newest revision.
const inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
	"You can start a new list without the continue parameter, or use the continue token in this response to " +
	"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
	"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
	"show up in the list."

// continueCompacted is the 410 Expired answer to a list continued with token cont
// whose revision is compacted: its metadata.continue lists the remainder from the
// token's key at the newest revision.
func continueCompacted(cont string) error {
	t, err := decodeContinue(cont)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	st := apierrors.NewResourceExpired(inconsistentContinue)
	st.ErrStatus.ListMeta.Continue = encodeContinue(latestRevision, t.Start)
	return st
}
