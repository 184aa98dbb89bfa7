package job

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
)

// matchSuccessPolicy reports whether an Indexed job's succeeded indexes meet
// a rule of its successPolicy, and the SuccessCriteriaMet message naming the
// first rule met, in upstream's wording. A rule with succeededIndexes is met
// when all of them succeeded, or succeededCount of them; a rule with only
// succeededCount when that many indexes succeeded. A rule whose
// succeededIndexes names no index below completions never matches.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, succeeded map[int]bool) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		switch {
		case rule.SucceededIndexes != nil:
			required := parseIndexes(*rule.SucceededIndexes, completions)
			if len(required) == 0 {
				continue
			}
			contains := 0
			for ix := range required {
				if succeeded[ix] {
					contains++
				}
			}
			if contains == len(required) || (rule.SucceededCount != nil && contains >= int(*rule.SucceededCount)) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		case rule.SucceededCount != nil && len(succeeded) >= int(*rule.SucceededCount):
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}
