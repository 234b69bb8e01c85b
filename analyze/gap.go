package analyze

// GapAttribution splits measured - theoretical bubble into causes. The
// parts add up to Gap exactly (Other takes the rest).
type GapAttribution struct {
	Gap       float64 // Measured - Theoretical
	Imbalance float64
	P2P       float64
	Jitter    float64 // jitter and stragglers
	Overhead  float64 // step overhead inside the window
	Other     float64
}

// attributeGap fills Bubble.Gap.
func attributeGap(ix *index, rep *Report) {}
