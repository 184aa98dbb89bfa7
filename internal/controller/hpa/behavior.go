package hpa

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
)

// history is what an HPA's past syncs leave for the next ones: the unstabilized
// recommendations (for the stabilization windows) and the scale changes made (for the
// rate policies). It lives in the controller's memory only, as upstream's: a restarted
// controller starts from the current size.
type history struct {
	recommendations []timedRecommendation
	scaleUps        []scaleEvent
	scaleDowns      []scaleEvent
}

type timedRecommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is one change of size; outdated ones (older than every policy period) are
// reused for new events instead of growing the list.
type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// limit is a normalization's verdict: the replica count and the ScalingLimited reason
// and message that explain it.
type limit struct {
	replicas int32
	reason   string
	message  string
}

// Reasons and messages of the AbleToScale and ScalingLimited conditions.
const (
	msgScaleUpStabilized   = "recent recommendations were lower than current one, applying the lowest recent recommendation"
	msgScaleDownStabilized = "recent recommendations were higher than current one, applying the highest recent recommendation"
	msgReadyForNewScale    = "recommended size matches current size"
	msgWithinRange         = "the desired count is within the acceptable range"
	msgTooMany             = "the desired replica count is more than the maximum replica count"
	msgTooFew              = "the desired replica count is less than the minimum replica count"
	msgScaleUpLimit        = "the desired replica count is increasing faster than the maximum scale rate"
	msgScaleDownLimit      = "the desired replica count is decreasing faster than the maximum scale rate"
)

// stabilize applies the downscale stabilization of an HPA without behavior: the largest
// recommendation within window wins. The new recommendation replaces an expired one or is
// appended.
func (h *history) stabilize(recommended int32, window time.Duration, now time.Time) int32 {
	result := recommended
	cutoff := now.Add(-window)
	old := -1
	for i, r := range h.recommendations {
		if r.at.Before(cutoff) {
			old = i
		} else if r.replicas > result {
			result = r.replicas
		}
	}
	h.record(old, recommended, now)
	return result
}

// stabilizeWithBehavior keeps the recommendation between the lowest one within the
// scale-up window and the highest one within the scale-down window, starting from the
// current size; it returns the stabilized count with the reason and message that apply
// when it differs from the recommendation.
func (h *history) stabilizeWithBehavior(current, recommended int32, up, down *autoscalingv2.HPAScalingRules, now time.Time) (int32, string, string) {
	upCutoff := now.Add(-time.Duration(deref(up.StabilizationWindowSeconds)) * time.Second)
	downCutoff := now.Add(-time.Duration(deref(down.StabilizationWindowSeconds)) * time.Second)
	upRec, downRec := recommended, recommended
	old := -1
	for i, r := range h.recommendations {
		if r.at.After(upCutoff) {
			upRec = min(upRec, r.replicas)
		}
		if r.at.After(downCutoff) {
			downRec = max(downRec, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old = i
		}
	}
	result := max(current, upRec)
	result = min(result, downRec)
	h.record(old, recommended, now)
	if recommended >= current {
		return result, "ScaleUpStabilized", msgScaleUpStabilized
	}
	return result, "ScaleDownStabilized", msgScaleDownStabilized
}

func (h *history) record(old int, replicas int32, now time.Time) {
	if old >= 0 {
		h.recommendations[old] = timedRecommendation{replicas, now}
		return
	}
	h.recommendations = append(h.recommendations, timedRecommendation{replicas, now})
}

// recordInitial notes the current size as a first recommendation, so that a new HPA
// does not scale down below it within the stabilization window.
func (h *history) recordInitial(current int32, now time.Time) {
	if h.recommendations == nil {
		h.recommendations = []timedRecommendation{{current, now}}
	}
}

// Limits of an HPA without behavior: it may at most double, or grow to 4, per sync.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// clampWithoutBehavior bounds a stabilized recommendation by minReplicas, maxReplicas and
// the legacy scale-up limit.
func clampWithoutBehavior(current, desired, minReplicas, maxReplicas int32) limit {
	upLimit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
	maxAllowed, reason, message := maxReplicas, "TooManyReplicas", msgTooMany
	if maxReplicas > upLimit {
		maxAllowed, reason, message = upLimit, "ScaleUpLimit", msgScaleUpLimit
	}
	switch {
	case desired < minReplicas:
		return limit{minReplicas, "TooFewReplicas", msgTooFew}
	case desired > maxAllowed:
		return limit{maxAllowed, reason, message}
	}
	return limit{desired, "DesiredWithinRange", msgWithinRange}
}

// clampWithBehavior bounds a stabilized recommendation by minReplicas, maxReplicas and
// the rate policies, counting the changes made within each policy's period.
func (h *history) clampWithBehavior(current, desired, minReplicas, maxReplicas int32, b *autoscalingv2.HorizontalPodAutoscalerBehavior, now time.Time) limit {
	switch {
	case desired > current:
		upLimit := max(scaleLimit(true, current, h.scaleUps, h.scaleDowns, b.ScaleUp, now), current)
		maxAllowed, reason, message := maxReplicas, "TooManyReplicas", msgTooMany
		if maxReplicas > upLimit {
			maxAllowed, reason, message = upLimit, "ScaleUpLimit", msgScaleUpLimit
		}
		if desired > maxAllowed {
			return limit{maxAllowed, reason, message}
		}
	case desired < current:
		downLimit := min(scaleLimit(false, current, h.scaleUps, h.scaleDowns, b.ScaleDown, now), current)
		minAllowed, reason, message := minReplicas, "TooFewReplicas", msgTooFew
		if minReplicas < downLimit {
			minAllowed, reason, message = downLimit, "ScaleDownLimit", msgScaleDownLimit
		}
		if desired < minAllowed {
			return limit{minAllowed, reason, message}
		}
	}
	return limit{desired, "DesiredWithinRange", msgWithinRange}
}

// changesWithin sums the changes made within the last periodSeconds.
func changesWithin(periodSeconds int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var sum int32
	for _, e := range events {
		if e.at.After(cutoff) {
			sum += e.change
		}
	}
	return sum
}

// scaleLimit is the size the scale-up (up) or scale-down policies allow now: per
// policy, the size at the start of its period plus (minus) what it allows; Max picks the
// most permissive limit (the largest for a scale-up, the smallest for a scale-down), Min
// the least, Disabled allows no change.
func scaleLimit(up bool, current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	policy := deref(rules.SelectPolicy)
	if policy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	result := int32(math.MaxInt32)
	pick := func(a, b int32) int32 { return min(a, b) }
	if up == (policy != autoscalingv2.MinChangePolicySelect) {
		result = math.MinInt32
		pick = func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range rules.Policies {
		start := current - changesWithin(p.PeriodSeconds, ups, now) + changesWithin(p.PeriodSeconds, downs, now)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case p.Type == autoscalingv2.PercentScalingPolicy && up:
			// Rounded up, or a small target could never grow.
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// recordScale remembers a successful change of size for the rate policies of b (nothing
// is kept for an HPA without behavior, which has no policies).
func (h *history) recordScale(b *autoscalingv2.HorizontalPodAutoscalerBehavior, from, to int32, now time.Time) {
	if b == nil {
		return
	}
	events, rules, change := &h.scaleDowns, b.ScaleDown, from-to
	if to > from {
		events, rules, change = &h.scaleUps, b.ScaleUp, to-from
	}
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	reuse := -1
	for i := range *events {
		if (*events)[i].at.Before(cutoff) {
			(*events)[i].outdated = true
		}
		if (*events)[i].outdated {
			reuse = i
		}
	}
	e := scaleEvent{change: change, at: now}
	if reuse >= 0 {
		(*events)[reuse] = e
		return
	}
	*events = append(*events, e)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
