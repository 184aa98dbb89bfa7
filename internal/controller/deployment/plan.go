package deployment

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// controllerKind is the kind written into the ownerReferences of our ReplicaSets.
var controllerKind = appsv1.SchemeGroupVersion.WithKind("Deployment")

// rsWrite is one ReplicaSet to create or update, with the
// ScalingReplicaSet event messages to record once the write succeeded.
type rsWrite struct {
	rs     *appsv1.ReplicaSet
	create bool
	events []string
}

// plan is what one sync of a Deployment writes, in this order: the
// ReplicaSet writes, the Deployment's revision annotation, the ReplicaSet
// deletions (history cleanup), the status.
type plan struct {
	writes []*rsWrite
	// revision is the Deployment's new revision annotation; "" keeps it.
	revision string
	deletes  []*appsv1.ReplicaSet
	// status is the new status; nil when it is unchanged.
	status *appsv1.DeploymentStatus
	// requeueAfter, when positive, asks for another look then, to notice
	// an exceeded progress deadline that no event would announce.
	requeueAfter time.Duration
}

// planner carries one sync's working copies: ReplicaSet changes made by
// one step are seen by the next, as upstream's sequence of API calls does.
type planner struct {
	orig *appsv1.Deployment
	d    *appsv1.Deployment
	rss  []*appsv1.ReplicaSet
	pods map[types.UID][]*v1.Pod
	now  time.Time
	p    plan
}

// planDeployment decides what to write for Deployment d with its
// (claimed) ReplicaSets and their pods by ReplicaSet UID, at time now:
// upstream's syncDeployment as a pure function.
func planDeployment(d *appsv1.Deployment, rsList []*appsv1.ReplicaSet, podsByRS map[types.UID][]*v1.Pod, now time.Time) plan {
	pl := &planner{orig: d, d: d.DeepCopy(), pods: podsByRS, now: now}
	for _, rs := range rsList {
		pl.rss = append(pl.rss, rs.DeepCopy())
	}
	pl.run()
	if pl.d.Annotations[revisionAnnotation] != d.Annotations[revisionAnnotation] {
		pl.p.revision = pl.d.Annotations[revisionAnnotation]
	}
	return pl.p
}

func (pl *planner) run() {
	d := pl.d
	if d.Spec.Selector == nil || (len(d.Spec.Selector.MatchLabels) == 0 && len(d.Spec.Selector.MatchExpressions) == 0) {
		if d.Status.ObservedGeneration < d.Generation {
			st := *d.Status.DeepCopy()
			st.ObservedGeneration = d.Generation
			pl.p.status = &st
		}
		return
	}
	if d.DeletionTimestamp != nil {
		newRS, old := pl.newAndOld(false)
		pl.syncStatus(append(old, newRS), newRS)
		return
	}
	pl.pausedConditions()
	if d.Spec.Paused {
		pl.syncScale()
		return
	}
	if pl.isScalingEvent() {
		pl.syncScale()
		return
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		pl.recreate()
		return
	}
	pl.rolling()
}

// pausedConditions keeps the Progressing condition saying whether the
// Deployment is paused, unless it has already timed out.
func (pl *planner) pausedConditions() {
	d := pl.d
	if !hasProgressDeadline(d) {
		return
	}
	c := condition(&d.Status, appsv1.DeploymentProgressing)
	if c != nil && c.Reason == reasonTimedOut {
		return
	}
	pausedExists := c != nil && c.Reason == reasonPaused
	switch {
	case d.Spec.Paused && !pausedExists:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, reasonPaused, "Deployment is paused", pl.now))
	case !d.Spec.Paused && pausedExists:
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionUnknown, reasonResumed, "Deployment is resumed", pl.now))
	}
}

// write queues rs (a working copy) for writing, once, with an event.
func (pl *planner) write(rs *appsv1.ReplicaSet, event string) {
	for _, w := range pl.p.writes {
		if w.rs == rs {
			if event != "" {
				w.events = append(w.events, event)
			}
			return
		}
	}
	w := &rsWrite{rs: rs}
	if event != "" {
		w.events = []string{event}
	}
	pl.p.writes = append(pl.p.writes, w)
}

// newAndOld finds the ReplicaSet whose template is the Deployment's (the
// oldest, should there be several) and the others; it syncs the new one's
// revision and, with create, makes it when there is none.
func (pl *planner) newAndOld(create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet) {
	slices.SortStableFunc(pl.rss, byCreation)
	var newRS *appsv1.ReplicaSet
	var old []*appsv1.ReplicaSet
	for _, rs := range pl.rss {
		if newRS == nil && equalIgnoreHash(&rs.Spec.Template, &pl.d.Spec.Template) {
			newRS = rs
			continue
		}
		old = append(old, rs)
	}
	newRevision := strconv.FormatInt(maxRevision(old)+1, 10)
	d := pl.d
	if newRS != nil {
		changed := setNewRSAnnotations(d, newRS, newRevision, true)
		if changed || newRS.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			newRS.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			pl.write(newRS, "")
			return newRS, old
		}
		pl.setRevision(newRS.Annotations[revisionAnnotation])
		if hasProgressDeadline(d) && condition(&d.Status, appsv1.DeploymentProgressing) == nil {
			setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reasonFoundNewRS,
				fmt.Sprintf("Found new replica set %q", newRS.Name), pl.now))
		}
		return newRS, old
	}
	if !create {
		return nil, old
	}
	newRS = pl.newReplicaSet(old)
	setNewRSAnnotations(d, newRS, newRevision, false)
	pl.rss = append(pl.rss, newRS)
	w := &rsWrite{rs: newRS, create: true}
	if n := replicasOf(newRS); n > 0 {
		w.events = []string{fmt.Sprintf("Scaled up replica set %s from 0 to %d", newRS.Name, n)}
	}
	pl.p.writes = append(pl.p.writes, w)
	pl.setRevision(newRevision)
	if hasProgressDeadline(d) {
		setCondition(&d.Status, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reasonNewRSCreated,
			fmt.Sprintf("Created new replica set %q", newRS.Name), pl.now))
	}
	return newRS, old
}

func (pl *planner) setRevision(rev string) {
	if pl.d.Annotations == nil {
		pl.d.Annotations = map[string]string{}
	}
	pl.d.Annotations[revisionAnnotation] = rev
}

// newReplicaSet is the ReplicaSet for the Deployment's current template:
// named <deployment>-<hash>, the hash added to its labels, selector and
// template, sized by newRSReplicas.
func (pl *planner) newReplicaSet(old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	d := pl.d
	t := *d.Spec.Template.DeepCopy()
	hash := templateHash(&t, d.Status.CollisionCount)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[hashLabel] = hash
	sel := d.Spec.Selector.DeepCopy()
	if sel.MatchLabels == nil {
		sel.MatchLabels = map[string]string{}
	}
	sel.MatchLabels[hashLabel] = hash
	rsLabels := map[string]string{}
	for k, v := range t.Labels {
		rsLabels[k] = v
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:            d.Name + "-" + hash,
			Namespace:       d.Namespace,
			Labels:          rsLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, controllerKind)},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        new(int32(0)),
			MinReadySeconds: d.Spec.MinReadySeconds,
			Selector:        sel,
			Template:        t,
		},
	}
	*rs.Spec.Replicas = newRSReplicas(d, append(slices.Clone(old), rs), rs)
	return rs
}

// newRSReplicas is how far the new ReplicaSet may grow now: for
// RollingUpdate up to replicas+maxSurge pods in all and no more than
// replicas; for Recreate, replicas.
func newRSReplicas(d *appsv1.Deployment, all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	n := deploymentReplicas(d)
	if !isRollingUpdate(d) {
		return n
	}
	maxTotal := n + maxSurge(d)
	current := sumOf(all, specReplicas)
	if current >= maxTotal {
		return replicasOf(newRS)
	}
	return replicasOf(newRS) + min(maxTotal-current, n-replicasOf(newRS))
}

// isScalingEvent reports a change of spec.replicas alone: an active
// ReplicaSet's desired-replicas annotation differs from it.
func (pl *planner) isScalingEvent() bool {
	newRS, old := pl.newAndOld(false)
	for _, rs := range active(append(old, newRS)) {
		desired, ok := rs.Annotations[desiredReplicasAnnotation]
		if !ok {
			continue
		}
		if desired != strconv.Itoa(int(deploymentReplicas(pl.d))) {
			return true
		}
	}
	return false
}

// scaleRS sets rs (a working copy) to size and the replicas annotations,
// queueing the write and, for a size change, the event.
func (pl *planner) scaleRS(rs *appsv1.ReplicaSet, size int32, op string) bool {
	n := deploymentReplicas(pl.d)
	old := replicasOf(rs)
	sizeChanged := old != size
	annotated := setReplicasAnnotations(rs, n, n+maxSurge(pl.d))
	if !sizeChanged && !annotated {
		return false
	}
	rs.Spec.Replicas = new(size)
	event := ""
	if sizeChanged {
		event = fmt.Sprintf("Scaled %s replica set %s from %d to %d", op, rs.Name, old, size)
	}
	pl.write(rs, event)
	return sizeChanged
}

func (pl *planner) scaleAndRecord(rs *appsv1.ReplicaSet, size int32) bool {
	if replicasOf(rs) == size {
		return false
	}
	op := "down"
	if replicasOf(rs) < size {
		op = "up"
	}
	return pl.scaleRS(rs, size, op)
}

// syncScale handles a paused Deployment or a replicas change: scale, then
// clean up (paused only) and write status.
func (pl *planner) syncScale() {
	newRS, old := pl.newAndOld(false)
	pl.scale(newRS, old)
	if pl.d.Spec.Paused {
		pl.cleanup(old)
	}
	pl.syncStatus(append(old, newRS), newRS)
}

// scale brings the ReplicaSets to spec.replicas: all of it to the one
// active (or newest) ReplicaSet; or old ones to zero when the new one is
// saturated; else, mid-rollout, proportionally to their sizes.
func (pl *planner) scale(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) {
	d := pl.d
	n := deploymentReplicas(d)
	if rs := activeOrLatest(newRS, old); rs != nil {
		pl.scaleAndRecord(rs, n)
		return
	}
	if isSaturated(d, newRS) {
		for _, rs := range active(old) {
			pl.scaleAndRecord(rs, 0)
		}
		return
	}
	if !isRollingUpdate(d) {
		return
	}
	all := active(append(slices.Clone(old), newRS))
	allowed := int32(0)
	if n > 0 {
		allowed = n + maxSurge(d)
	}
	toAdd := allowed - sumOf(all, specReplicas)
	op := ""
	switch {
	case toAdd > 0:
		slices.SortStableFunc(all, bySizeNewer)
		op = "up"
	case toAdd < 0:
		slices.SortStableFunc(all, bySizeOlder)
		op = "down"
	}
	added := int32(0)
	sizes := make([]int32, len(all))
	for i, rs := range all {
		sizes[i] = replicasOf(rs)
		if toAdd != 0 {
			p := proportion(rs, d, toAdd, added)
			sizes[i] += p
			added += p
		}
	}
	for i, rs := range all {
		if i == 0 && toAdd != 0 {
			sizes[i] = max(sizes[i]+toAdd-added, 0)
		}
		pl.scaleRS(rs, sizes[i], op)
	}
}

// activeOrLatest is the only active ReplicaSet, or the newest one when
// none is active; nil when several are active.
func activeOrLatest(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(old) == 0 {
		return nil
	}
	sorted := slices.Clone(old)
	slices.SortStableFunc(sorted, func(a, b *appsv1.ReplicaSet) int { return byCreation(b, a) })
	all := active(append(sorted, newRS))
	switch len(all) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return sorted[0]
	case 1:
		return all[0]
	}
	return nil
}

// isSaturated reports the new ReplicaSet at full size and available.
func isSaturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	desired, err := strconv.Atoi(rs.Annotations[desiredReplicasAnnotation])
	if err != nil {
		return false
	}
	n := deploymentReplicas(d)
	return replicasOf(rs) == n && int32(desired) == n && rs.Status.AvailableReplicas == n
}

// proportion is rs's share of toAdd replicas (of which added are given
// out already), by its size relative to the max-replicas it was sized for.
func proportion(rs *appsv1.ReplicaSet, d *appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || replicasOf(rs) == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	fraction := fraction(rs, d)
	allowed := toAdd - added
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

func fraction(rs *appsv1.ReplicaSet, d *appsv1.Deployment) int32 {
	n := deploymentReplicas(d)
	if n == 0 {
		return -replicasOf(rs)
	}
	maxNow := n + maxSurge(d)
	before := int32(0)
	if v, err := strconv.ParseInt(rs.Annotations[maxReplicasAnnotation], 10, 32); err == nil {
		before = int32(v)
	}
	if before == 0 {
		before = d.Status.Replicas
		if before == 0 {
			return 0
		}
	}
	size := float64(replicasOf(rs)*maxNow) / float64(before)
	return roundToInt32(size) - replicasOf(rs)
}

// rolling is one step of a RollingUpdate: scale the new ReplicaSet up if
// it may grow, else old ones down if availability allows, else (once
// complete) clean up history.
func (pl *planner) rolling() {
	newRS, old := pl.newAndOld(true)
	all := append(slices.Clone(old), newRS)
	if pl.reconcileNew(all, newRS) {
		pl.rolloutStatus(all, newRS)
		return
	}
	if pl.reconcileOld(all, active(old), newRS) {
		pl.rolloutStatus(all, newRS)
		return
	}
	if deploymentComplete(pl.d, &pl.d.Status) {
		pl.cleanup(old)
	}
	pl.rolloutStatus(all, newRS)
}

func (pl *planner) reconcileNew(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	n := deploymentReplicas(pl.d)
	switch {
	case replicasOf(newRS) == n:
		return false
	case replicasOf(newRS) > n:
		return pl.scaleAndRecord(newRS, n)
	}
	return pl.scaleAndRecord(newRS, newRSReplicas(pl.d, all, newRS))
}

// reconcileOld scales old ReplicaSets down as far as maxUnavailable
// allows: first their unavailable replicas (cleanupUnhealthy), then
// available ones, oldest ReplicaSets first.
func (pl *planner) reconcileOld(all, old []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) bool {
	oldCount := sumOf(old, specReplicas)
	if oldCount == 0 {
		return false
	}
	d := pl.d
	minAvailable := deploymentReplicas(d) - maxUnavailable(d)
	newUnavailable := replicasOf(newRS) - newRS.Status.AvailableReplicas
	maxScaledDown := sumOf(all, specReplicas) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false
	}
	cleaned := pl.cleanupUnhealthy(old, maxScaledDown)
	scaled := pl.scaleDownOld(append(slices.Clone(old), newRS), old)
	return cleaned+scaled > 0
}

func (pl *planner) cleanupUnhealthy(old []*appsv1.ReplicaSet, maxCleanup int32) int32 {
	slices.SortStableFunc(old, byCreation)
	total := int32(0)
	for _, rs := range old {
		if total >= maxCleanup {
			break
		}
		if replicasOf(rs) == 0 || replicasOf(rs) == rs.Status.AvailableReplicas {
			continue
		}
		down := min(maxCleanup-total, replicasOf(rs)-rs.Status.AvailableReplicas)
		pl.scaleAndRecord(rs, replicasOf(rs)-down)
		total += down
	}
	return total
}

func (pl *planner) scaleDownOld(all, old []*appsv1.ReplicaSet) int32 {
	d := pl.d
	minAvailable := deploymentReplicas(d) - maxUnavailable(d)
	available := sumOf(all, availableReplicas)
	if available <= minAvailable {
		return 0
	}
	slices.SortStableFunc(old, byCreation)
	want := available - minAvailable
	total := int32(0)
	for _, rs := range old {
		if total >= want {
			break
		}
		if replicasOf(rs) == 0 {
			continue
		}
		down := min(replicasOf(rs), want-total)
		pl.scaleAndRecord(rs, replicasOf(rs)-down)
		total += down
	}
	return total
}

// recreate is one step of a Recreate rollout: old ReplicaSets to zero,
// wait until no old pod runs, then the new ReplicaSet at full size.
func (pl *planner) recreate() {
	newRS, old := pl.newAndOld(false)
	all := append(slices.Clone(old), newRS)
	scaled := false
	for _, rs := range active(old) {
		if pl.scaleAndRecord(rs, 0) {
			scaled = true
		}
	}
	if scaled || pl.oldPodsRunning(newRS, old) {
		pl.rolloutStatus(all, newRS)
		return
	}
	if newRS == nil {
		newRS, old = pl.newAndOld(true)
		all = append(slices.Clone(old), newRS)
	}
	pl.scaleAndRecord(newRS, deploymentReplicas(pl.d))
	if deploymentComplete(pl.d, &pl.d.Status) {
		pl.cleanup(old)
	}
	pl.rolloutStatus(all, newRS)
}

func (pl *planner) oldPodsRunning(newRS *appsv1.ReplicaSet, old []*appsv1.ReplicaSet) bool {
	if sumOf(old, statusReplicas) > 0 {
		return true
	}
	for uid, pods := range pl.pods {
		if newRS != nil && newRS.UID == uid {
			continue
		}
		for _, pod := range pods {
			if pod.Status.Phase != v1.PodFailed && pod.Status.Phase != v1.PodSucceeded {
				return true
			}
		}
	}
	return false
}

// cleanup deletes the oldest revisions beyond revisionHistoryLimit, never
// one that still has pods or whose status is not caught up.
func (pl *planner) cleanup(old []*appsv1.ReplicaSet) {
	d := pl.d
	if !hasRevisionHistoryLimit(d) {
		return
	}
	var alive []*appsv1.ReplicaSet
	for _, rs := range old {
		if rs != nil && rs.DeletionTimestamp == nil {
			alive = append(alive, rs)
		}
	}
	diff := len(alive) - int(*d.Spec.RevisionHistoryLimit)
	if diff <= 0 {
		return
	}
	slices.SortStableFunc(alive, byRevision)
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || replicasOf(rs) != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		pl.p.deletes = append(pl.p.deletes, rs)
	}
}

// calculateStatus is the Deployment status the ReplicaSets add up to,
// with the Available condition; other conditions are carried over.
func (pl *planner) calculateStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	d := pl.d
	avail := sumOf(all, availableReplicas)
	total := sumOf(all, specReplicas)
	st := appsv1.DeploymentStatus{
		ObservedGeneration:  d.Generation,
		Replicas:            sumOf(all, statusReplicas),
		UpdatedReplicas:     sumOf([]*appsv1.ReplicaSet{newRS}, statusReplicas),
		ReadyReplicas:       sumOf(all, readyReplicas),
		AvailableReplicas:   avail,
		UnavailableReplicas: max(total-avail, 0),
		CollisionCount:      d.Status.CollisionCount,
		TerminatingReplicas: terminatingReplicas(all),
		Conditions:          slices.Clone(d.Status.Conditions),
	}
	if avail >= deploymentReplicas(d)-maxUnavailable(d) {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, v1.ConditionTrue, reasonMinimumAvailable, "Deployment has minimum availability.", pl.now))
	} else {
		setCondition(&st, newCondition(appsv1.DeploymentAvailable, v1.ConditionFalse, reasonMinimumUnavailable, "Deployment does not have minimum availability.", pl.now))
	}
	return st
}

// syncStatus writes the computed status when it changed.
func (pl *planner) syncStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	pl.finish(pl.calculateStatus(all, newRS))
}

func (pl *planner) finish(st appsv1.DeploymentStatus) {
	if len(st.Conditions) == 0 {
		st.Conditions = nil
	}
	if !apiequality.Semantic.DeepEqual(pl.orig.Status, st) {
		pl.p.status = &st
	}
}

// rolloutStatus is syncStatus plus the Progressing condition (complete,
// progressing, or timed out) and the ReplicaSets' ReplicaFailure.
func (pl *planner) rolloutStatus(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) {
	d := pl.d
	st := pl.calculateStatus(all, newRS)
	if !hasProgressDeadline(d) {
		removeCondition(&st, appsv1.DeploymentProgressing)
	}
	cur := condition(&d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == reasonNewRSAvailable
	if hasProgressDeadline(d) && !complete {
		subject := fmt.Sprintf("Deployment %q", d.Name)
		if newRS != nil {
			subject = fmt.Sprintf("ReplicaSet %q", newRS.Name)
		}
		switch {
		case deploymentComplete(d, &st):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reasonNewRSAvailable, subject+" has successfully progressed.", pl.now))
		case deploymentProgressing(d, &st):
			c := newCondition(appsv1.DeploymentProgressing, v1.ConditionTrue, reasonRSUpdated, subject+" is progressing.", pl.now)
			if cur != nil {
				if cur.Status == v1.ConditionTrue {
					c.LastTransitionTime = cur.LastTransitionTime
				}
				removeCondition(&st, appsv1.DeploymentProgressing)
			}
			setCondition(&st, c)
		case deploymentTimedOut(d, &st, pl.now):
			setCondition(&st, newCondition(appsv1.DeploymentProgressing, v1.ConditionFalse, reasonTimedOut, subject+" has timed out progressing.", pl.now))
		}
	}
	if c, ok := replicaFailure(all, newRS); ok {
		setCondition(&st, c)
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	pl.finish(st)
	if pl.p.status == nil {
		pl.p.requeueAfter = pl.stuckRequeue(st)
	}
}

// stuckRequeue is when to look again so that an exceeded deadline is
// reported although nothing else changes.
func (pl *planner) stuckRequeue(st appsv1.DeploymentStatus) time.Duration {
	d := pl.d
	cur := condition(&d.Status, appsv1.DeploymentProgressing)
	if !hasProgressDeadline(d) || cur == nil || deploymentComplete(d, &st) || cur.Reason == reasonTimedOut {
		return 0
	}
	after := cur.LastUpdateTime.Add(time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second).Sub(pl.now)
	if after < time.Second {
		return time.Second
	}
	return after + time.Second
}

// replicaFailure is the first ReplicaFailure condition of the new
// ReplicaSet, else of any, as a Deployment condition.
func replicaFailure(all []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (appsv1.DeploymentCondition, bool) {
	for _, rs := range append([]*appsv1.ReplicaSet{newRS}, all...) {
		if rs == nil {
			continue
		}
		for _, c := range rs.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure {
				return appsv1.DeploymentCondition{
					Type: appsv1.DeploymentReplicaFailure, Status: c.Status, Reason: c.Reason, Message: c.Message,
					LastUpdateTime: c.LastTransitionTime, LastTransitionTime: c.LastTransitionTime,
				}, true
			}
		}
	}
	return appsv1.DeploymentCondition{}, false
}
