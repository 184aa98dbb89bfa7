package deployment

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/davecgh/go-spew/spew"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Annotations and labels shared with kubectl (rollout history/undo read them).
const (
	// revisionAnnotation numbers a ReplicaSet's (and its Deployment's) revision.
	revisionAnnotation = "deployment.kubernetes.io/revision"
	// revisionHistoryAnnotation lists earlier revisions a ReplicaSet had
	// before a rollback made it current again.
	revisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	// desiredReplicasAnnotation is the Deployment's replicas when the
	// ReplicaSet was last scaled, for proportional scaling.
	desiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	// maxReplicasAnnotation is replicas + maxSurge at that time.
	maxReplicasAnnotation = "deployment.kubernetes.io/max-replicas"
	// hashLabel tells the pods of one template apart from another's.
	hashLabel = "pod-template-hash"
	// maxRevisionHistoryChars bounds the revision-history annotation.
	maxRevisionHistoryChars = 2000
)

// Condition reasons, as kubectl rollout status and describe read them.
const (
	reasonNewRSCreated        = "NewReplicaSetCreated"
	reasonFoundNewRS          = "FoundNewReplicaSet"
	reasonRSUpdated           = "ReplicaSetUpdated"
	reasonNewRSAvailable      = "NewReplicaSetAvailable"
	reasonTimedOut            = "ProgressDeadlineExceeded"
	reasonPaused              = "DeploymentPaused"
	reasonResumed             = "DeploymentResumed"
	reasonFailedRSCreate      = "ReplicaSetCreateError"
	reasonMinimumAvailable    = "MinimumReplicasAvailable"
	reasonMinimumUnavailable  = "MinimumReplicasUnavailable"
	eventScalingReplicaSet    = "ScalingReplicaSet"
	eventSelectingAll         = "SelectingAll"
	lastAppliedAnnotation     = "kubectl.kubernetes.io/last-applied-configuration"
	deprecatedRollbackToAnnot = "deprecated.deployment.rollback.to"
)

// notCopied are the Deployment annotations never copied to its ReplicaSets.
var notCopied = map[string]bool{
	lastAppliedAnnotation:     true,
	revisionAnnotation:        true,
	revisionHistoryAnnotation: true,
	desiredReplicasAnnotation: true,
	maxReplicasAnnotation:     true,
	deprecatedRollbackToAnnot: true,
}

// templateHash is the pod-template-hash of a template: FNV-32a over its
// spew dump (plus the collision count), in the safe alphabet, as upstream
// computes it so that names look the same as on a real cluster.
func templateHash(t *v1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	printer := spew.ConfigState{Indent: " ", SortKeys: true, DisableMethods: true, SpewKeys: true}
	printer.Fprintf(h, "%#v", *t)
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// equalIgnoreHash compares two templates apart from the pod-template-hash label.
func equalIgnoreHash(a, b *v1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, hashLabel)
	delete(b.Labels, hashLabel)
	return apiequality.Semantic.DeepEqual(a, b)
}

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs == nil || rs.Spec.Replicas == nil {
		return 0
	}
	return *rs.Spec.Replicas
}

func deploymentReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

func isRollingUpdate(d *appsv1.Deployment) bool {
	return d.Spec.Strategy.Type == appsv1.RollingUpdateDeploymentStrategyType
}

// fenceposts resolves maxSurge (rounded up) and maxUnavailable (rounded
// down) against the replica count; both zero would stall, so
// maxUnavailable becomes 1 then.
func fenceposts(d *appsv1.Deployment) (surge, unavailable int32) {
	ru := d.Spec.Strategy.RollingUpdate
	var ms, mu *intstr.IntOrString
	if ru != nil {
		ms, mu = ru.MaxSurge, ru.MaxUnavailable
	}
	n := int(deploymentReplicas(d))
	s, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ms, intstr.FromInt32(0)), n, true)
	if err != nil {
		s = 0
	}
	u, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(mu, intstr.FromInt32(0)), n, false)
	if err != nil {
		u = 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

func maxSurge(d *appsv1.Deployment) int32 {
	if !isRollingUpdate(d) {
		return 0
	}
	s, _ := fenceposts(d)
	return s
}

func maxUnavailable(d *appsv1.Deployment) int32 {
	n := deploymentReplicas(d)
	if !isRollingUpdate(d) || n == 0 {
		return 0
	}
	_, u := fenceposts(d)
	return min(u, n)
}

func hasProgressDeadline(d *appsv1.Deployment) bool {
	return d.Spec.ProgressDeadlineSeconds != nil && *d.Spec.ProgressDeadlineSeconds != math.MaxInt32
}

func hasRevisionHistoryLimit(d *appsv1.Deployment) bool {
	return d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != math.MaxInt32
}

func revision(rs *appsv1.ReplicaSet) int64 {
	n, err := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

func maxRevision(rss []*appsv1.ReplicaSet) int64 {
	var m int64
	for _, rs := range rss {
		m = max(m, revision(rs))
	}
	return m
}

// byCreation orders ReplicaSets oldest first, then by name.
func byCreation(a, b *appsv1.ReplicaSet) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

// byRevision orders ReplicaSets by revision, then by creation.
func byRevision(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(revision(a), revision(b)); c != 0 {
		return c
	}
	return byCreation(a, b)
}

// bySizeNewer orders larger ReplicaSets first, newer first among equals
// (scaling up favours the new); bySizeOlder favours the old on equals
// (scaling down removes from the old first).
func bySizeNewer(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(replicasOf(b), replicasOf(a)); c != 0 {
		return c
	}
	return byCreation(b, a)
}

func bySizeOlder(a, b *appsv1.ReplicaSet) int {
	if c := cmp.Compare(replicasOf(b), replicasOf(a)); c != 0 {
		return c
	}
	return byCreation(a, b)
}

func active(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && replicasOf(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out
}

// sumOf adds f over the non-nil ReplicaSets.
func sumOf(rss []*appsv1.ReplicaSet, f func(*appsv1.ReplicaSet) int32) int32 {
	var n int32
	for _, rs := range rss {
		if rs != nil {
			n += f(rs)
		}
	}
	return n
}

func specReplicas(rs *appsv1.ReplicaSet) int32      { return replicasOf(rs) }
func statusReplicas(rs *appsv1.ReplicaSet) int32    { return rs.Status.Replicas }
func readyReplicas(rs *appsv1.ReplicaSet) int32     { return rs.Status.ReadyReplicas }
func availableReplicas(rs *appsv1.ReplicaSet) int32 { return rs.Status.AvailableReplicas }

// terminatingReplicas sums status.terminatingReplicas; unknown (nil) when
// any ReplicaSet does not report it.
func terminatingReplicas(rss []*appsv1.ReplicaSet) *int32 {
	var n int32
	for _, rs := range rss {
		switch {
		case rs == nil:
		case rs.Status.TerminatingReplicas == nil:
			return nil
		default:
			n += *rs.Status.TerminatingReplicas
		}
	}
	return &n
}

func condition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func newCondition(t appsv1.DeploymentConditionType, s v1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	return appsv1.DeploymentCondition{
		Type: t, Status: s, Reason: reason, Message: msg,
		LastUpdateTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
	}
}

// setCondition sets c unless a condition of its type with the same
// status and reason is there; with the same status it keeps the
// transition time.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := condition(st, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return
	}
	if cur != nil && cur.Status == c.Status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	removeCondition(st, c.Type)
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	st.Conditions = slices.DeleteFunc(slices.Clone(st.Conditions), func(c appsv1.DeploymentCondition) bool { return c.Type == t })
}

// setReplicasAnnotations records desired and max replicas on rs and
// reports a change.
func setReplicasAnnotations(rs *appsv1.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]string{desiredReplicasAnnotation: fmt.Sprint(desired), maxReplicasAnnotation: fmt.Sprint(maxReplicas)} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// setNewRSAnnotations copies the Deployment's annotations to its new
// ReplicaSet and raises the ReplicaSet's revision to newRevision, keeping
// the revision it had in revision-history (a rollback). A ReplicaSet about
// to be created (exists false) also gets the replicas annotations.
func setNewRSAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, newRevision string, exists bool) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range d.Annotations {
		if notCopied[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	oldRevision, had := rs.Annotations[revisionAnnotation]
	oldN, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			return false
		}
		oldN = 0
	}
	newN, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		return false
	}
	if oldN < newN {
		rs.Annotations[revisionAnnotation] = newRevision
		changed = true
		if had {
			history := rs.Annotations[revisionHistoryAnnotation]
			old := strings.Split(history, ",")
			if old[0] == "" {
				rs.Annotations[revisionHistoryAnnotation] = oldRevision
			} else {
				total := len(history) + len(oldRevision) + 1
				start := 0
				for total > maxRevisionHistoryChars && start < len(old) {
					total -= len(old[start]) + 1
					start++
				}
				if total <= maxRevisionHistoryChars {
					rs.Annotations[revisionHistoryAnnotation] = strings.Join(append(old[start:], oldRevision), ",")
				}
			}
		}
	}
	n := deploymentReplicas(d)
	if !exists && setReplicasAnnotations(rs, n, n+maxSurge(d)) {
		changed = true
	}
	return changed
}

// deploymentComplete reports every desired replica updated and available
// and the current generation observed.
func deploymentComplete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	n := deploymentReplicas(d)
	return st.UpdatedReplicas == n && st.Replicas == n && st.AvailableReplicas == n && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing reports progress since d.Status: more updated,
// ready or available replicas, or fewer old ones.
func deploymentProgressing(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	oldOld := d.Status.Replicas - d.Status.UpdatedReplicas
	newOld := st.Replicas - st.UpdatedReplicas
	return st.UpdatedReplicas > d.Status.UpdatedReplicas || newOld < oldOld ||
		st.ReadyReplicas > d.Status.ReadyReplicas || st.AvailableReplicas > d.Status.AvailableReplicas
}

// deploymentTimedOut reports a rollout without progress for longer than
// progressDeadlineSeconds since the Progressing condition last changed.
func deploymentTimedOut(d *appsv1.Deployment, st *appsv1.DeploymentStatus, now time.Time) bool {
	if !hasProgressDeadline(d) {
		return false
	}
	c := condition(st, appsv1.DeploymentProgressing)
	if c == nil || c.Reason == reasonNewRSAvailable {
		return false
	}
	if c.Reason == reasonTimedOut {
		return true
	}
	return c.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Before(now)
}

// roundToInt32 rounds half away from zero.
func roundToInt32(f float64) int32 {
	if f < 0 {
		return int32(f - 0.5)
	}
	return int32(f + 0.5)
}
