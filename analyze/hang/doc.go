// Package hang is the post-mortem of a hung pipeline-parallel job: from
// what each rank recorded before the dump, it names the ranks whose
// send/recv state machines stopped matching, the first op where they
// diverged, and why.
//
// # Matching
//
// Sends and receives match as NCCL's do: between an ordered pair of ranks
// (src, dst), the k-th send of src to dst meets the k-th receive of dst
// from src, whatever their labels. The rank pair is the channel
// (interleaved chunks share it, as they share the communicator); when
// every P2P op names its process group (the Group column, as Flight
// Recorder dumps give it), the channel is (group, src, dst). Sequence
// numbers of P2P ops are not used: a Flight Recorder's p2p_seq_id counts
// each rank's own ops, so a send and its receive carry different ones.
// Each matched pair is then checked label by label: step, micro-batch,
// kind (SEND_F with RECV_F, SEND_B with RECV_B), shape, dtype, bytes.
// Matching is one pass over the ranks, each in seq order, in batches of
// consecutive ranks that follow their chains (a pipeline's next stage comes
// right after the stage it receives from, while its rows are in cache):
// each op finds its channel by indexing arrays by peer rank (no hash maps)
// and meets the first op waiting on the channel's other side, which a rank
// scanned earlier posted, or waits for one; the pair's labels are checked
// while both ranks' rows are in cache. Channels are then numbered in the
// order of their first op in the rows.
//
// # Collectives
//
// Collectives match per process group by sequence number (GroupSeq): for
// each collective, which members posted it, which completed it (a row that
// ended, a later collective of the group, or the dump's progress), and
// which never posted it (their last sequence number in the group is
// lower); members that posted different collectives, dtypes or sizes under
// one number disagree. A rank blocked in a collective waits for the
// members that never posted it and for those blocked in an earlier op
// (Flight Recorder dumps show work posted ahead of the GPU); the chain goes
// on through their own P2P ops and collectives to a root. A collective
// that some member completed is over for the group: a rank still showing
// it pending stopped making progress itself (a GPU error, a hung kernel).
// A rank whose dump holds nothing in flight (Options.Dumps) is idle: its
// host stopped issuing work.
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
