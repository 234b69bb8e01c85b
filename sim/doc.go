// Package sim is a discrete-event simulator of pipeline-parallel training
// that emits the trace a collector would have written: a schedule (from
// package schedule) run on a cost model, with faults injected.
//
// # Ranks
//
// The job has Stages*DP*TP ranks, numbered as Megatron does: rank =
// (stage*DP + pipeline)*TP + tp_rank. Each rank runs its stage's action list
// for every step; a P2P action's peer is the rank with the same pipeline and
// TP rank on the peer stage. TP collectives inside compute are not modelled:
// the TP ranks of a stage stay in lockstep because their costs are the same
// (jitter is drawn per stage, not per TP rank). Times are virtual ns from 0.
//
// # Timing
//
//   - Compute (F, B, W) starts when the rank is free and lasts its cost
//     (issue = start).
//   - SEND is posted (issue) when the rank reaches it and never blocks the
//     rank. Its transfer starts at the later of its post and the matched
//     receive's post, and ends latency + bytes/bandwidth later.
//   - RECV is posted when the rank reaches it and blocks the rank: start =
//     later of its post and the matched send's post, end = start + latency +
//     bytes/bandwidth; the rank resumes at end.
//   - Sends and receives of an ordered (src, dst) pair match in issue order,
//     as NCCL's do, whatever their labels: a recv row keeps the labels its
//     rank expected (micro-batch, kind, shape), the send row its own.
//   - A matched pair whose byte counts differ never completes: both rows
//     get the start (both sides were launched) and a null end, the receiver
//     blocks for good, and no later op on that pair matches.
//   - After a step's actions a rank waits for its own sends of the step to
//     complete, then posts OPT. OPT is a barrier across all ranks (it holds
//     the gradient all-reduce): it starts at the latest arrival and lasts
//     OptMs; the next step starts at its end. While some rank never arrives
//     (crash, exit, hang), the others' OPT rows stay posted (issue set) with
//     null start and end, and nothing follows them.
//
// With uniform costs and free communication the measured bubble of each
// step (DESIGN.md "The numbers, defined") is exactly (p-1)/(m+p-1) for gpipe
// and 1f1b and (p-1)/(v*m+p-1) for interleaved.
//
// # Costs
//
// FwdMs, BwdMs and WgradMs are per micro-batch per whole stage; one chunk of
// an interleaved stage costs 1/v of them. Schedules that record W apart
// (zb-h1) split BwdMs half and half between B and W when WgradMs is 0, else
// B costs BwdMs and W WgradMs; the others fold WgradMs into B. EmbedMs and
// LossMs add to the forward of the first and last virtual stage. A compute
// duration is nominal * SlowFactor (on SlowStage) * matching straggler
// factors * matching SlowRanks factors (one stage of one replica,
// slowrank.go) * jitter, where nominal scales with the micro-batch's sequence
// length over SeqLen (VarSeqLen). Durations are rounded to whole ns.
// Random draws come from math/rand seeded with Seed, made up front in a
// fixed order, so a Config always yields the same trace.
//
// # Faults
//
// A faulted run ends the way the real job would: ranks that would block
// keep their posted-but-never-completed op as a row with a null end and
// record nothing after it (a blocked rank's sends posted before it blocked
// may still be pending too); a crashed rank records nothing after its crash.
//
//   - skip:rank=R,step=S,mb=M: R drops every action of M in step S
//     (receives, compute, sends). Later pairs then carry different labels on
//     the two sides, and the job hangs once the counts no longer match.
//   - shape:rank=R,step=S,mb=M: R's sends of M in step S carry a shape with
//     the first dimension doubled (twice the bytes): the pair hangs.
//   - dtype:rank=R,step=S,mb=M: R's sends of M in step S carry fp32 (bf16
//     when the job's dtype is fp32): the bytes differ and the pair hangs.
//   - crash:rank=R,step=S,mb=M: R dies at its first action of M in step S.
//     That row has a start and a null end; it is not posted to any peer.
//     R's earlier sends complete only if their transfer was over by the
//     crash; otherwise both sides stay pending (started if it had begun).
//   - exit:rank=R,step=S: R exits cleanly before step S: no rows from step S
//     on.
//   - reorder:rank=R,step=S,mb=M: each send of M by R in step S moves to just
//     after R's send of M+1 of the same kind, chunk and peer.
//   - optskip:rank=R,step=S: R records OPT_SKIP (KindOptSkip) instead of
//     OPT in step S. It still takes part in the barrier, with zero duration;
//     the job carries on.
package sim
