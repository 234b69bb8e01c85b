package analyze

// Straggler is one compute op far slower than its (stage, kind) peers.
type Straggler struct {
	Step       int64
	Pipeline   int
	Stage      int
	Rank       int
	MicroBatch int
	Kind       string
	DurMs      float64
	ExpectedMs float64 // typical duration for its (stage, kind), scaled by tokens when known
	Factor     float64 // DurMs / typical
	Tokens     int64
	Class      string  // "long_sequence" (explained by tokens) or "slow" (not)
	DelayMs    float64 // how much later the step ended because of it (slow-car effect, replay)
}

// analyzeStragglers fills Report.Stragglers.
func analyzeStragglers(ix *index, rep *Report) {}
