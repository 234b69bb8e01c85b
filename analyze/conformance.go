package analyze

// Conformance is the schedule ppprof recognised from each stage's op order
// and how the trace departs from it and from synchronous training.
type Conformance struct {
	Identified string      // gpipe, 1f1b, interleaved, zb-h1, or "" when none fits
	Virtual    int         // chunks per stage of the identified schedule
	Deviations []Deviation // ops out of the identified schedule's order
	Violations []Violation // breaks of synchronous training's consistency line
}

// Deviation is one place where a rank's op order departs from the schedule.
type Deviation struct {
	Step  int64
	Rank  int
	Stage int
	Index int    // position in the rank's compute order within the step
	Want  string // the schedule's action, e.g. "F3"
	Got   string // the trace's
}

// Violation is a break of synchronous training's rules.
type Violation struct {
	Code       string // e.g. "f_before_opt", "missing_op", "duplicate_op", "optimizer_skip_mismatch", "microbatch_count"
	Step       int64
	Stage      int
	Rank       int
	MicroBatch int
	Message    string
}

// analyzeConformance fills Report.Schedule.
func analyzeConformance(ix *index, rep *Report) {}
