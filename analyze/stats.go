package analyze

// Dist summarises durations of one kind of op, in milliseconds.
type Dist struct {
	N        int
	MeanMs   float64
	MedianMs float64
	P95Ms    float64
	MinMs    float64
	MaxMs    float64
}

// Overhead is time a step spends outside the pipeline window in one kind of
// op (OPT, DATA, CKPT...), mean per step over ranks' stages.
type Overhead struct {
	Kind   string
	MeanMs float64 // mean per step of the union of this kind's intervals on the slowest stage
}

// analyzeStats fills StageSummary.F/B/W, the per-stage idle split, the
// steady idle split (Bubble.SteadyP2P/SteadyOther) and Report.Overhead.
func analyzeStats(ix *index, rep *Report) {}
