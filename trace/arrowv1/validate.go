package arrowv1

import (
	"github.com/ppprof/ppprof/trace"
)

// validate is t.Validate(), answered without it for the common trace of
// one rank that breaks no rule (trace.OneRankValid): a rank file as a
// collector writes it. Anything else, and every error, is t.Validate's.
func validate(t *trace.Trace) error {
	if t.OneRankValid() {
		return nil
	}
	return t.Validate()
}

// b2u is 1 for true, 0 for false (a flag set without a branch).
func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
