package analyze

import "sort"

// Finding codes: stable identifiers users and CI match on.
const (
	CodeIncompleteStep        = "INCOMPLETE_STEP"
	CodeBubbleHigh            = "BUBBLE_HIGH"
	CodeStageImbalance        = "STAGE_IMBALANCE"
	CodeStraggler             = "STRAGGLER"
	CodeP2PExposed            = "P2P_EXPOSED"
	CodeActivationOverBound   = "ACTIVATION_OVER_BOUND"
	CodeScheduleDeviation     = "SCHEDULE_DEVIATION"
	CodeOptimizerSkipMismatch = "OPTIMIZER_SKIP_MISMATCH"
	CodeSyncViolation         = "SYNC_VIOLATION"
	CodeP2PBytesMismatch      = "P2P_BYTES_MISMATCH"
)

// collectFindings derives findings from the filled report.
func collectFindings(ix *index, rep *Report) []Finding {
	var fs []Finding
	fs = append(fs, conformanceFindings(ix, rep)...)
	fs = append(fs, imbalanceFindings(ix, rep)...)
	fs = append(fs, stragglersFindings(ix, rep)...)
	fs = append(fs, gapFindings(ix, rep)...)
	fs = append(fs, memoryFindings(ix, rep)...)
	fs = append(fs, p2pFindings(ix, rep)...)
	return fs
}

var severityRank = map[string]int{"error": 0, "warning": 1, "info": 2}

// rankFindings orders findings: errors first, then by the step time each
// costs, then by code for determinism.
func rankFindings(fs []Finding) []Finding {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		if severityRank[a.Severity] != severityRank[b.Severity] {
			return severityRank[a.Severity] < severityRank[b.Severity]
		}
		if a.ImpactMs != b.ImpactMs {
			return a.ImpactMs > b.ImpactMs
		}
		return a.Code < b.Code
	})
	return fs
}
