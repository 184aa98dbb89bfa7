package statefulset

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

// revisionData is what a StatefulSet's ControllerRevision stores: the
// strategic merge patch {"spec":{"template":{...,"$patch":"replace"}}}
// that `kubectl rollout undo` applies back, as upstream writes it.
func revisionData(set *appsv1.StatefulSet) ([]byte, error) {
	raw, err := json.Marshal(set.Spec.Template)
	if err != nil {
		return nil, fmt.Errorf("encoding template of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	var tmpl map[string]any
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		return nil, fmt.Errorf("decoding template of StatefulSet %s/%s: %w", set.Namespace, set.Name, err)
	}
	tmpl["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
}

// revisionHash hashes revision data salted with collisionCount.
func revisionHash(data []byte, collisionCount *int32) string {
	h := fnv.New32a()
	h.Write(data)
	if collisionCount != nil {
		h.Write([]byte(strconv.FormatInt(int64(*collisionCount), 10)))
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

// history is the outcome of comparing a set's template with its revisions.
type history struct {
	// current and update are the revisions pods below and from the
	// partition run; update is the set's template.
	current, update *appsv1.ControllerRevision
	// create is update when it does not exist yet; bump is update when an
	// older revision matches the template and must become the newest.
	create, bump *appsv1.ControllerRevision
	// deletes are revisions beyond the history limit no pod uses.
	deletes []string
}

// planHistory finds or makes the update revision, resolves the current one
// from status.currentRevision, and trims history.
func planHistory(set *appsv1.StatefulSet, revs []*appsv1.ControllerRevision, liveRevisions map[string]bool) (history, error) {
	var h history
	data, err := revisionData(set)
	if err != nil {
		return h, err
	}
	hash := revisionHash(data, set.Status.CollisionCount)
	sorted := append([]*appsv1.ControllerRevision(nil), revs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Revision < sorted[j].Revision })
	var maxRev int64
	for _, r := range sorted {
		maxRev = max(maxRev, r.Revision)
		if bytes.Equal(r.Data.Raw, data) {
			h.update = r
		}
	}
	switch {
	case h.update == nil:
		labels := copyMap(set.Spec.Template.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[appsv1.ControllerRevisionHashLabelKey] = hash
		h.update = &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{
				Name:            revisionName(set.Name, hash),
				Namespace:       set.Namespace,
				Labels:          labels,
				Annotations:     copyMap(set.Annotations),
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(set, controllerKind)},
			},
			Data:     runtime.RawExtension{Raw: data},
			Revision: maxRev + 1,
		}
		h.create = h.update
	case h.update.Revision < maxRev:
		bumped := h.update.DeepCopy()
		bumped.Revision = maxRev + 1
		h.update, h.bump = bumped, bumped
	}
	for _, r := range sorted {
		if r.Name == set.Status.CurrentRevision {
			h.current = r
		}
	}
	if h.current == nil {
		h.current = h.update
	}
	limit := 10
	if set.Spec.RevisionHistoryLimit != nil {
		limit = int(*set.Spec.RevisionHistoryLimit)
	}
	var old []*appsv1.ControllerRevision
	for _, r := range sorted {
		if r.Name != h.update.Name && r.Name != h.current.Name && !liveRevisions[r.Name] {
			old = append(old, r)
		}
	}
	for i := 0; i < len(old)-limit; i++ {
		h.deletes = append(h.deletes, old[i].Name)
	}
	return h, nil
}
