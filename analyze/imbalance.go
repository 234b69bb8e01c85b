package analyze

// Imbalance names the slowest stage and what balancing would buy.
type Imbalance struct {
	SlowestStage     int     // by busy time per window
	SlowestStageByFB int     // by mean F+B (+W) per micro-batch
	BusyMs           float64 // the slowest stage's mean busy per window
	MeanBusyMs       float64 // mean over stages
	ExcessMs         float64 // BusyMs - MeanBusyMs
	ExcessFrac       float64 // ExcessMs / MeanBusyMs
	BalancedStepMs   float64 // predicted step time if every stage cost the mean stage (replay), 0 when unknown
}

// analyzeImbalance fills Report.Imbalance.
func analyzeImbalance(ix *index, rep *Report) {}
