package trace

import "math"

// Rank is a global rank: the process that recorded an event.
type Rank int32

// NoRank marks "no peer" in the Peer column of a non-P2P event.
const NoRank Rank = -1

// Stage is a pipeline rank (physical stage), 0 is the first stage.
type Stage int32

// MicroBatch is a micro-batch id within a step.
type MicroBatch int32

// NoMicroBatch marks an event that belongs to no micro-batch (OPT, DATA...).
const NoMicroBatch MicroBatch = -1

// NoTime marks a null start_ns or end_ns: an op that never started, or that
// was still pending when the trace was written (a hung job's last ops).
const NoTime int64 = math.MinInt64

// NoGroupSeq marks an unknown sequence number in the GroupSeq column: an op
// with no process group, or one whose recorder did not say.
const NoGroupSeq int64 = -1
