package analyze

// P2P summarises point-to-point traffic.
type P2P struct {
	BytesPerStep      float64    // bytes sent over all boundaries per step (per pipeline replica)
	ModelBytesPerStep float64    // the model m x (V_F + V_B) per boundary, summed; 0 when shapes are unknown
	ExposedMs         float64    // mean per window of P2P transfer time not overlapped with compute, summed over stages
	Boundaries        []Boundary // one per (from stage, to stage, direction)
}

// Boundary is the traffic across one stage boundary in one direction.
type Boundary struct {
	From, To          int
	Kind              string  // "activation" (SEND_F) or "gradient" (SEND_B)
	BytesPerStep      float64 // measured, per pipeline replica
	ModelBytesPerStep float64 // m x V from shapes and dtypes, 0 when unknown
	GBps              float64 // achieved: bytes / transfer time, GB/s (1e9 bytes/s); 0 when transfers take no time
	ExposedMs         float64 // mean per window, on the receiving stage
}

// analyzeP2P fills Report.P2P.
func analyzeP2P(ix *index, rep *Report) {}
