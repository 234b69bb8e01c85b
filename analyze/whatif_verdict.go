package analyze

import (
	"fmt"
	"strings"
)

// SlowVerdict tells a slow worker (one machine: a bad GPU or link, slow on
// one replica only) from a slow stage (slow on every replica: the layers
// are badly partitioned), with the step time fixing each would buy.
//
// A worker's compute is the sum over its (chunk, kind), F, B and W, of the
// median duration times the op count; a stage's is the median over its
// workers (replicas). The slowest stage is the one with the most compute,
// StageFactor its compute over the median stage's; it is slow on every
// replica when each of its workers exceeds the median stage by more than
// SlowFactorThreshold. The slowest worker is the one of slow_worker_fixed
// (the largest factor over its peers, compute and transfers received
// together); it is a slow worker when its compute (WorkerFactor: a slow
// GPU) or the transfers it receives (WorkerLinkFactor: a slow link) exceed
// its peers' by more than SlowFactorThreshold.
type SlowVerdict struct {
	// Kind is VerdictSlowStage, VerdictSlowWorker, VerdictBoth or
	// VerdictNone.
	Kind string
	// Stage is the slowest stage (-1 when no stage has compute);
	// StageFactor its compute over the median stage's.
	Stage       int
	StageFactor float64
	// EveryReplica says every replica's worker of Stage exceeds the median
	// stage by more than the threshold.
	EveryReplica bool
	// WorkerPipeline and WorkerStage name the slowest worker, WorkerRanks
	// its ranks; -1, -1 and none with fewer than two replicas.
	WorkerPipeline int
	WorkerStage    int
	WorkerRanks    []int
	WorkerFactor   float64 // its compute over its peers'; 0 with fewer than two replicas
	// WorkerLinkFactor is the time of the transfers it receives over its
	// peers'; 0 without transfers or replicas.
	WorkerLinkFactor float64
	// BalancedSavedMs is what balanced saves per step (measured - predicted,
	// may be negative: then balancing alone would not help), and
	// WorkerSavedMs what slow_worker_fixed saves; 0 when not predicted.
	BalancedSavedMs float64
	WorkerSavedMs   float64
	Message         string // one sentence with the numbers
}

// Verdict kinds.
const (
	VerdictSlowStage  = "slow_stage"
	VerdictSlowWorker = "slow_worker"
	VerdictBoth       = "both"
	VerdictNone       = "none"
)

// SlowFactorThreshold is the factor over the median (stage or peers) above
// which a stage or worker counts as slow.
const SlowFactorThreshold = 1.05

// verdict decides from the worker medians and the two scenarios'
// predictions.
func (st *whatIfStats) verdict(stepMs float64, balanced, worker Scenario) SlowVerdict {
	vd := SlowVerdict{Kind: VerdictNone, Stage: -1, WorkerPipeline: -1, WorkerStage: -1}
	if balanced.Available {
		vd.BalancedSavedMs = balanced.SavedMs
	}
	if worker.Available {
		vd.WorkerSavedMs = worker.SavedMs
	}
	// 1. Compute per worker, per stage.
	work := map[[2]int32]float64{}
	for _, k := range st.keys {
		if k.kind.IsCompute() {
			work[[2]int32{k.pipeline, k.stage}] += st.worker[k] * float64(st.workerN[k])
		}
	}
	stageWork := make([]float64, st.p)
	var stageMeds []float64
	for s := range int32(st.p) {
		var ws []float64
		for _, pipe := range st.replicas {
			if x, ok := work[[2]int32{pipe, s}]; ok {
				ws = append(ws, x)
			}
		}
		if len(ws) > 0 {
			stageWork[s] = median(ws)
			stageMeds = append(stageMeds, stageWork[s])
			if vd.Stage < 0 || stageWork[s] > stageWork[vd.Stage] {
				vd.Stage = int(s)
			}
		}
	}
	medStage := median(stageMeds)
	if vd.Stage >= 0 && medStage > 0 {
		vd.StageFactor = stageWork[vd.Stage] / medStage
		vd.EveryReplica = true
		for _, pipe := range st.replicas {
			if x, ok := work[[2]int32{pipe, int32(vd.Stage)}]; ok && x <= SlowFactorThreshold*medStage {
				vd.EveryReplica = false
			}
		}
	}
	stageSlow := vd.StageFactor > SlowFactorThreshold && vd.EveryReplica

	// 2. The slowest worker.
	w, ok := st.slowestWorker()
	if ok {
		vd.WorkerPipeline, vd.WorkerStage = int(w.pipeline), int(w.stage)
		vd.WorkerFactor, vd.WorkerLinkFactor = w.computeFactor, w.linkFactor
		vd.WorkerRanks = st.ranksOf[[2]int32{w.pipeline, w.stage}]
	}
	gpu, link := vd.WorkerFactor > SlowFactorThreshold, vd.WorkerLinkFactor > SlowFactorThreshold
	workerSlow := ok && (gpu || link)

	// 3. Say it.
	saves := func(ms float64, what string) string {
		if ms > 0 {
			return fmt.Sprintf("%s would save %.3g ms per step (%.3g%%)", what, ms, 100*ms/stepMs)
		}
		return what + " alone would not shorten the step"
	}
	stageSay := fmt.Sprintf("stage %d is slow on every replica (%.3gx the median stage): a partitioning imbalance", vd.Stage, vd.StageFactor)
	workerSay := ""
	if ok {
		var what []string
		if gpu || !link {
			what = append(what, fmt.Sprintf("computes %.3gx as long as its peers in the other replicas", vd.WorkerFactor))
		}
		if link {
			what = append(what, fmt.Sprintf("receives %.3gx as long", vd.WorkerLinkFactor))
		}
		cause := map[[2]bool]string{{true, false}: "a slow GPU", {false, true}: "a slow link", {true, true}: "a slow GPU and link"}[[2]bool{gpu, link}]
		if cause == "" {
			cause = "a slow GPU or link"
		}
		workerSay = fmt.Sprintf("pipeline %d stage %d (%s) %s: %s", w.pipeline, w.stage, rankList(vd.WorkerRanks),
			strings.Join(what, " and "), cause)
	}
	switch {
	case stageSlow && workerSlow:
		vd.Kind = VerdictBoth
		vd.Message = fmt.Sprintf("%s; and %s. %s; %s", stageSay, workerSay,
			saves(vd.BalancedSavedMs, "balancing the stages"), saves(vd.WorkerSavedMs, "fixing the worker"))
	case stageSlow:
		vd.Kind = VerdictSlowStage
		vd.Message = fmt.Sprintf("%s, not one bad machine: %s, fixing the slowest worker %.3g ms", stageSay,
			saves(vd.BalancedSavedMs, "balancing the stages"), vd.WorkerSavedMs)
		if !ok {
			vd.Message = fmt.Sprintf("%s (one replica, so a slow machine cannot be ruled out): %s", stageSay,
				saves(vd.BalancedSavedMs, "balancing the stages"))
		}
	case workerSlow:
		vd.Kind = VerdictSlowWorker
		vd.Message = fmt.Sprintf("%s, not a partitioning problem: %s, balancing the stages %.3g ms", workerSay,
			saves(vd.WorkerSavedMs, "fixing it"), vd.BalancedSavedMs)
	default:
		vd.Message = fmt.Sprintf("no stage is slow on every replica and no worker is more than %.0f%% slower than its peers",
			100*(SlowFactorThreshold-1))
		if vd.Stage >= 0 && vd.StageFactor > SlowFactorThreshold {
			vd.Message = fmt.Sprintf("stage %d is %.3gx the median stage but not on every replica, and no worker is more than %.0f%% slower than its peers",
				vd.Stage, vd.StageFactor, 100*(SlowFactorThreshold-1))
		}
	}
	return vd
}
