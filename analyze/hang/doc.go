// Package hang is the post-mortem of a hung pipeline-parallel job: from
// what each rank recorded before the dump, it names the ranks whose
// send/recv state machines stopped matching, the first op where they
// diverged, and why.
//
// # Matching
//
// Sends and receives match as NCCL's do: between an ordered pair of ranks
// (src, dst), the k-th send of src to dst meets the k-th receive of dst
// from src, whatever their labels. The event model has no communicator
// column, so the rank pair is the channel (interleaved chunks share it, as
// they share the communicator). Each matched pair is then checked label by
// label: step, micro-batch, kind (SEND_F with RECV_F, SEND_B with RECV_B),
// shape, dtype, bytes.
//
// # Semantics assumed
//
// A send never blocks its rank but stays pending (null end) until matched
// and done; a receive blocks its rank. A pair whose byte counts differ
// never completes. OPT (or OPT_SKIP) is a barrier across all ranks: a rank
// whose OPT is pending waits for every rank that has not posted OPT of
// that step. These are the semantics of package sim, and of NCCL with a
// global gradient-norm or all-reduce in the optimizer step.
//
// # Dump time
//
// Waiting times are measured up to the dump time: Options.DumpNs when
// given, else the latest timestamp (issue, start or end) anywhere in the
// trace. Ranks' clocks are taken as one time base.
//
// # Missing data
//
// A rank whose file lost bytes (Options.Files), whose peers completed ops
// it has no record of, or that never posted an optimizer step others
// completed, has events missing from the dump. When the diagnosis rests on
// such a rank the verdict is incomplete and names it, rather than blaming
// it for a hang its lost events may explain. A file that was only not
// closed (normal for a hung or killed process) loses nothing.
package hang
