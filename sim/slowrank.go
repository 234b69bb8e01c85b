package sim

import (
	"fmt"
	"math"
	"strconv"
)

// SlowRank makes one worker slow: the compute (F, B and W) of stage Stage
// in pipeline replica Pipeline takes Factor times its cost, in every step,
// on every TP rank of that stage (one slow GPU holds its TP peers back in
// every TP collective, so the group runs at its pace). The same stage of
// the other replicas keeps its cost: this is the slow machine of one
// replica, as opposed to SlowStage, a stage slow in every replica (a
// partitioning imbalance).
type SlowRank struct {
	Pipeline int     // pipeline replica (data-parallel index)
	Stage    int     // stage
	Factor   float64 // duration multiplier, > 0
}

// String returns s in the form ParseSlowRank reads.
func (s SlowRank) String() string {
	return fmt.Sprintf("pipeline=%d,stage=%d,factor=%s", s.Pipeline, s.Stage, strconv.FormatFloat(s.Factor, 'g', -1, 64))
}

// ParseSlowRank reads "pipeline=P,stage=S,factor=X"; pipeline defaults to
// 0. Factor must be a finite number > 0.
func ParseSlowRank(spec string) (SlowRank, error) {
	s := SlowRank{}
	err := parseKeyValues(spec, []string{"stage"}, []*int{&s.Stage},
		map[string]*int{"pipeline": &s.Pipeline}, &s.Factor)
	if err == nil && s.Factor == 0 {
		err = fmt.Errorf("missing key \"factor\"")
	}
	if err != nil {
		return SlowRank{}, fmt.Errorf("slow rank %q: %w", spec, err)
	}
	return s, nil
}

// check reports whether s fits the defaulted config c.
func (s SlowRank) check(c Config) error {
	switch {
	case !(s.Factor > 0) || math.IsInf(s.Factor, 0):
		return fmt.Errorf("factor %v: want a finite number > 0", s.Factor)
	case s.Pipeline < 0 || s.Pipeline >= c.DP:
		return fmt.Errorf("pipeline %d out of range: the job has replicas 0 to %d", s.Pipeline, c.DP-1)
	case s.Stage < 0 || s.Stage >= c.Stages:
		return fmt.Errorf("stage %d out of range: the job has stages 0 to %d", s.Stage, c.Stages-1)
	}
	return nil
}

// slowRankFactor is the product of the factors of the slow ranks on stage
// of pipeline pipe; 1 when none.
func slowRankFactor(rs []SlowRank, pipe, stage int) float64 {
	f := 1.0
	for _, s := range rs {
		if s.Pipeline == pipe && s.Stage == stage {
			f *= s.Factor
		}
	}
	return f
}
