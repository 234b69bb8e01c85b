package analyze

// Memory is live micro-batches and activation memory per stage.
type Memory struct {
	Stages []StageMemory
}

// StageMemory is the live-activation picture of one stage.
type StageMemory struct {
	Stage int
	Peak  int         // most live micro-batches on one rank at once
	Bound int         // the schedule's bound, 0 when unknown
	Live  []LivePoint // live count over time for the first analysed window, pipeline 0, lowest rank
}

// LivePoint is the live micro-batch count from AtNs on.
type LivePoint struct {
	AtNs int64
	Live int
}

// analyzeMemory fills Report.Memory and StageSummary.LiveBound and
// PeakActivationBytes.
func analyzeMemory(ix *index, rep *Report) {}
