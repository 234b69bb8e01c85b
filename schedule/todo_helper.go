package schedule

import "fmt"

// Interleaved is interleaved 1F1B with v chunks per stage. (Being written.)
func Interleaved(p, m, v int) (*Schedule, error) {
	return nil, fmt.Errorf("schedule interleaved: not implemented yet")
}

// ZBH1 is the ZB-H1 zero-bubble schedule. (Being written.)
func ZBH1(p, m int) (*Schedule, error) {
	return nil, fmt.Errorf("schedule zb-h1: not implemented yet")
}
