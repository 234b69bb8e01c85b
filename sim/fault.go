package sim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// FaultKind is what an injected fault does. The zero FaultKind is invalid.
type FaultKind uint8

// The fault kinds of DESIGN.md "Contracts"; the package comment says what
// each does to the simulated job.
const (
	FaultInvalid FaultKind = iota // zero value: not a fault
	FaultSkip                     // skip:rank=R,step=S,mb=M
	FaultShape                    // shape:rank=R,step=S,mb=M
	FaultDtype                    // dtype:rank=R,step=S,mb=M
	FaultCrash                    // crash:rank=R,step=S,mb=M
	FaultExit                     // exit:rank=R,step=S
	FaultReorder                  // reorder:rank=R,step=S,mb=M
	FaultOptSkip                  // optskip:rank=R,step=S
	numFaultKinds
)

var faultNames = [numFaultKinds]string{
	FaultInvalid: "",
	FaultSkip:    "skip",
	FaultShape:   "shape",
	FaultDtype:   "dtype",
	FaultCrash:   "crash",
	FaultExit:    "exit",
	FaultReorder: "reorder",
	FaultOptSkip: "optskip",
}

// String returns the kind's name as in a fault spec ("skip", "crash"...).
func (k FaultKind) String() string {
	if k > FaultInvalid && k < numFaultKinds {
		return faultNames[k]
	}
	return fmt.Sprintf("FaultKind(%d)", uint8(k))
}

// hasMicroBatch reports whether faults of kind k name a micro-batch.
func (k FaultKind) hasMicroBatch() bool { return k != FaultExit && k != FaultOptSkip }

// Fault is one injected fault: Kind on global rank Rank in optimizer step
// Step, at micro-batch MicroBatch (-1 for exit and optskip, which name none).
type Fault struct {
	Kind       FaultKind
	Rank       int
	Step       int
	MicroBatch int
}

// String returns f as a fault spec that ParseFault reads back.
func (f Fault) String() string {
	if !f.Kind.hasMicroBatch() {
		return fmt.Sprintf("%s:rank=%d,step=%d", f.Kind, f.Rank, f.Step)
	}
	return fmt.Sprintf("%s:rank=%d,step=%d,mb=%d", f.Kind, f.Rank, f.Step, f.MicroBatch)
}

// ParseFault reads a fault spec (DESIGN.md): KIND:rank=R,step=S,mb=M for
// skip, shape, dtype, crash and reorder; KIND:rank=R,step=S for exit and
// optskip. Every key is required, once; values are non-negative integers.
// Whether they fit a job is checked by Config.Validate.
func ParseFault(spec string) (Fault, error) {
	name, args, ok := strings.Cut(spec, ":")
	if !ok {
		return Fault{}, fmt.Errorf("fault %q: want KIND:rank=R,step=S[,mb=M]", spec)
	}
	f := Fault{MicroBatch: -1}
	for k := FaultSkip; k < numFaultKinds; k++ {
		if faultNames[k] == name {
			f.Kind = k
		}
	}
	if f.Kind == FaultInvalid {
		return Fault{}, fmt.Errorf("fault %q: unknown kind %q (want skip, shape, dtype, crash, exit, reorder or optskip)", spec, name)
	}
	keys := []string{"rank", "step"}
	dst := []*int{&f.Rank, &f.Step}
	if f.Kind.hasMicroBatch() {
		keys = append(keys, "mb")
		dst = append(dst, &f.MicroBatch)
	}
	if err := parseKeyValues(args, keys, dst, nil, nil); err != nil {
		return Fault{}, fmt.Errorf("fault %q: %w", spec, err)
	}
	return f, nil
}

// check reports whether f fits the defaulted config c.
func (f Fault) check(c Config) error {
	world := c.Stages * c.DP * c.TP
	switch {
	case f.Kind <= FaultInvalid || f.Kind >= numFaultKinds:
		return fmt.Errorf("invalid fault kind %d", f.Kind)
	case f.Rank < 0 || f.Rank >= world:
		return fmt.Errorf("rank %d out of range: the job has ranks 0 to %d", f.Rank, world-1)
	case f.Step < 0 || f.Step >= c.Steps:
		return fmt.Errorf("step %d out of range: the job runs steps 0 to %d", f.Step, c.Steps-1)
	}
	if !f.Kind.hasMicroBatch() {
		return nil
	}
	if f.MicroBatch < 0 || f.MicroBatch >= c.MicroBatches {
		return fmt.Errorf("micro-batch %d out of range: a step has micro-batches 0 to %d", f.MicroBatch, c.MicroBatches-1)
	}
	switch f.Kind {
	case FaultShape, FaultDtype, FaultReorder:
		if c.Stages < 2 {
			return fmt.Errorf("a 1-stage pipeline sends nothing")
		}
	}
	if f.Kind == FaultReorder && f.MicroBatch+1 >= c.MicroBatches {
		return fmt.Errorf("micro-batch %d is the last of the step: there is no %d to swap with", f.MicroBatch, f.MicroBatch+1)
	}
	return nil
}

// Straggler makes one micro-batch slow: the compute (F, B and W) of
// micro-batch MicroBatch on stage Stage in step Step takes Factor times its
// cost, in every pipeline replica.
type Straggler struct {
	Step       int     // optimizer step; -1 means every step
	MicroBatch int     // micro-batch id
	Stage      int     // stage; -1 means every stage
	Factor     float64 // duration multiplier, > 0
}

// String returns s in the form ParseStraggler reads.
func (s Straggler) String() string {
	out := fmt.Sprintf("mb=%d,factor=%s", s.MicroBatch, strconv.FormatFloat(s.Factor, 'g', -1, 64))
	if s.Stage >= 0 {
		out += fmt.Sprintf(",stage=%d", s.Stage)
	}
	if s.Step >= 0 {
		out += fmt.Sprintf(",step=%d", s.Step)
	}
	return out
}

// ParseStraggler reads "mb=M,factor=X[,stage=S][,step=N]": stage and step
// default to -1 (every stage, every step). Factor must be a finite number
// > 0.
func ParseStraggler(spec string) (Straggler, error) {
	s := Straggler{Step: -1, Stage: -1}
	err := parseKeyValues(spec, []string{"mb"}, []*int{&s.MicroBatch},
		map[string]*int{"stage": &s.Stage, "step": &s.Step}, &s.Factor)
	if err != nil {
		return Straggler{}, fmt.Errorf("straggler %q: %w", spec, err)
	}
	return s, nil
}

// check reports whether s fits the defaulted config c.
func (s Straggler) check(c Config) error {
	switch {
	case !(s.Factor > 0) || math.IsInf(s.Factor, 0):
		return fmt.Errorf("factor %v: want a finite number > 0", s.Factor)
	case s.MicroBatch < 0 || s.MicroBatch >= c.MicroBatches:
		return fmt.Errorf("micro-batch %d out of range: a step has micro-batches 0 to %d", s.MicroBatch, c.MicroBatches-1)
	case s.Stage < -1 || s.Stage >= c.Stages:
		return fmt.Errorf("stage %d: want -1 (all) or a stage in [0, %d)", s.Stage, c.Stages)
	case s.Step < -1 || s.Step >= c.Steps:
		return fmt.Errorf("step %d: want -1 (all) or a step in [0, %d)", s.Step, c.Steps)
	}
	return nil
}

// parseKeyValues reads "k=v,k=v": every key in required once, into the int
// at the same index of dst; optional keys into their int; and, if factor is
// not nil, a required "factor" float. Integers must be >= 0.
func parseKeyValues(s string, required []string, dst []*int, optional map[string]*int, factor *float64) error {
	seen := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return fmt.Errorf("%q: want key=value", kv)
		}
		if seen[k] {
			return fmt.Errorf("key %q given twice", k)
		}
		seen[k] = true
		if k == "factor" && factor != nil {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil || !(x > 0) || math.IsInf(x, 0) {
				return fmt.Errorf("factor=%q: want a finite number > 0", v)
			}
			*factor = x
			continue
		}
		var p *int
		for i, r := range required {
			if r == k {
				p = dst[i]
			}
		}
		if p == nil {
			p = optional[k]
		}
		if p == nil {
			want := append([]string(nil), required...)
			for o := range optional {
				want = append(want, o)
			}
			if factor != nil {
				want = append(want, "factor")
			}
			slices.Sort(want)
			return fmt.Errorf("unknown key %q (want %s)", k, strings.Join(want, ", "))
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return fmt.Errorf("%s=%q: want a non-negative integer", k, v)
		}
		*p = int(n)
	}
	for _, r := range required {
		if !seen[r] {
			return fmt.Errorf("missing %s=", r)
		}
	}
	if factor != nil && !seen["factor"] {
		return fmt.Errorf("missing factor=")
	}
	return nil
}
