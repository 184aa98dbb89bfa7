package daemonset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
)

// revisionData is what a DaemonSet's ControllerRevision stores: the strategic
// merge patch {"spec":{"template":{...,"$patch":"replace"}}} that
// `kubectl rollout undo` applies back, as upstream writes it.
func revisionData(ds *appsv1.DaemonSet) ([]byte, error) {
	raw, err := json.Marshal(ds.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("encoding template of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return nil, fmt.Errorf("decoding template of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// templateHash is the controller-revision-hash of the DaemonSet's template:
// stable across restarts (JSON is canonical) and salted with collisionCount
// so that a name collision can be escaped.
func templateHash(ds *appsv1.DaemonSet) string {
	h := fnv.New32a()
	raw, _ := json.Marshal(ds.Spec.Template)
	h.Write(raw)
	if ds.Status.CollisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*ds.Status.CollisionCount), 10)))
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// revisionName is <set>-<hash>, the set name cut to fit a 253-character name.
func revisionName(set, hash string) string {
	if len(set) > 223 {
		set = set[:223]
	}
	return set + "-" + hash
}

// revisionPlan says what to do with a DaemonSet's history: create or bump
// the current revision, and delete revisions beyond the history limit.
type revisionPlan struct {
	// create is a new current revision, nil when one exists.
	create *appsv1.ControllerRevision
	// bump is an existing revision matching the template whose number must
	// become the highest (the template was rolled back to it).
	bump *appsv1.ControllerRevision
	// deletes are old revisions no live pod uses, oldest first.
	deletes []string
}

// planRevisions compares the DaemonSet's template with its revisions.
// liveHashes are the controller-revision-hash labels of its live pods.
func planRevisions(ds *appsv1.DaemonSet, hash string, data []byte, revs []*appsv1.ControllerRevision, liveHashes map[string]bool) revisionPlan {
	var p revisionPlan
	sorted := append([]*appsv1.ControllerRevision(nil), revs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Revision < sorted[j].Revision })
	var maxRev int64
	var current *appsv1.ControllerRevision
	for _, r := range sorted {
		maxRev = max(maxRev, r.Revision)
		if bytes.Equal(r.Data.Raw, data) || r.Name == revisionName(ds.Name, hash) {
			current = r
		}
	}
	switch {
	case current == nil:
		p.create = &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name:            revisionName(ds.Name, hash),
				Namespace:       ds.Namespace,
				Labels:          revisionLabels(ds, hash),
				Annotations:     copyMap(ds.Annotations),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))},
			},
			Data:     runtime.RawExtension{Raw: data},
			Revision: maxRev + 1,
		}
	case current.Revision < maxRev:
		bumped := current.DeepCopy()
		bumped.Revision = maxRev + 1
		p.bump = bumped
	}
	limit := 10
	if ds.Spec.RevisionHistoryLimit != nil {
		limit = int(*ds.Spec.RevisionHistoryLimit)
	}
	var old []*appsv1.ControllerRevision
	for _, r := range sorted {
		if r != current && !liveHashes[r.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			old = append(old, r)
		}
	}
	for i := 0; i < len(old)-limit; i++ {
		p.deletes = append(p.deletes, old[i].Name)
	}
	return p
}

func revisionLabels(ds *appsv1.DaemonSet, hash string) map[string]string {
	l := copyMap(ds.Spec.Template.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[appsv1.DefaultDaemonSetUniqueLabelKey] = hash
	return l
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
