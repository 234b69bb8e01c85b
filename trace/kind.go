package trace

import (
	"fmt"
	"sync"
	"unicode"
)

// Kind is what an event did: forward, backward, a P2P send or receive, the
// optimizer step, or a free-form kind named by the runtime (DATA, LOSS,
// CKPT...). The zero Kind is invalid.
//
// The well-known kinds have fixed values. Free-form kinds are interned in a
// process-wide table by ParseKind, so the same name always maps to the same
// Kind and Kinds compare across traces.
type Kind uint16

// The well-known kinds, named after the action notation of
// torch.distributed.pipelining.
const (
	KindInvalid Kind = iota // zero value: not a kind
	F                       // forward of one micro-batch (one chunk)
	B                       // backward (backward-input when W is separate)
	W                       // backward-weight (zero-bubble schedules)
	SendF                   // send activations to the next stage
	RecvF                   // receive activations from the previous stage
	SendB                   // send gradients to the previous stage
	RecvB                   // receive gradients from the next stage
	Opt                     // optimizer step

	// Collectives, one kind per operation whatever the library called it
	// (NCCL "allreduce", Flight Recorder "nccl:all_reduce", ...). Their
	// rows carry the process group in Group and the collective's sequence
	// number within it in GroupSeq.
	AllReduce     // ALL_REDUCE
	AllGather     // ALL_GATHER (also all_gather_into_tensor, _allgather_base)
	ReduceScatter // REDUCE_SCATTER (also _reduce_scatter_base)
	AllToAll      // ALL_TO_ALL (all_to_all, alltoall_base, all_to_allv)
	Broadcast     // BROADCAST
	Barrier       // BARRIER
	Reduce        // REDUCE
	Gather        // GATHER
	Scatter       // SCATTER
	Collective    // COLLECTIVE: a collective of another or unknown type (coalesced groups...)
	numWellKnown
)

// MaxCustomKinds bounds the number of distinct free-form kind names one
// process accepts, so hostile input cannot grow the table without limit.
const MaxCustomKinds = 4096

// MaxKindNameLen is the longest kind name accepted, in bytes.
const MaxKindNameLen = 64

var wellKnownNames = [numWellKnown]string{
	KindInvalid: "",
	F:           "F",
	B:           "B",
	W:           "W",
	SendF:       "SEND_F",
	RecvF:       "RECV_F",
	SendB:       "SEND_B",
	RecvB:       "RECV_B",
	Opt:         "OPT",

	AllReduce:     "ALL_REDUCE",
	AllGather:     "ALL_GATHER",
	ReduceScatter: "REDUCE_SCATTER",
	AllToAll:      "ALL_TO_ALL",
	Broadcast:     "BROADCAST",
	Barrier:       "BARRIER",
	Reduce:        "REDUCE",
	Gather:        "GATHER",
	Scatter:       "SCATTER",
	Collective:    "COLLECTIVE",
}

var kindTable = struct {
	sync.RWMutex
	byName map[string]Kind
	names  []string // index: Kind - numWellKnown
}{byName: map[string]Kind{}}

func init() {
	for k := F; k < numWellKnown; k++ {
		kindTable.byName[wellKnownNames[k]] = k
	}
}

// ParseKind returns the Kind named name, interning a new free-form kind the
// first time a name is seen. Names are case-sensitive, 1 to MaxKindNameLen
// bytes of letters, digits, '_', '-', ':', '.' or '/'.
func ParseKind(name string) (Kind, error) {
	kindTable.RLock()
	k, ok := kindTable.byName[name]
	kindTable.RUnlock()
	if ok {
		return k, nil
	}
	if err := checkKindName(name); err != nil {
		return KindInvalid, err
	}
	kindTable.Lock()
	defer kindTable.Unlock()
	if k, ok := kindTable.byName[name]; ok {
		return k, nil
	}
	if len(kindTable.names) >= MaxCustomKinds {
		return KindInvalid, fmt.Errorf("kind %q: more than %d distinct kind names", name, MaxCustomKinds)
	}
	k = numWellKnown + Kind(len(kindTable.names))
	kindTable.names = append(kindTable.names, name)
	kindTable.byName[name] = k
	return k, nil
}

// MustKind is ParseKind for names known to be valid (constants in code). It
// panics on a bad name; never call it with input from a file.
func MustKind(name string) Kind {
	k, err := ParseKind(name)
	if err != nil {
		panic(err)
	}
	return k
}

func checkKindName(name string) error {
	if name == "" {
		return fmt.Errorf("empty kind")
	}
	if len(name) > MaxKindNameLen {
		return fmt.Errorf("kind %.20q...: longer than %d bytes", name, MaxKindNameLen)
	}
	for _, r := range name {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
		case r == '_' || r == '-' || r == ':' || r == '.' || r == '/':
		default:
			return fmt.Errorf("kind %q: character %q not allowed", name, r)
		}
	}
	return nil
}

// String returns the kind's name ("F", "SEND_F", "DATA"...), or "INVALID(n)"
// for a value no name maps to.
func (k Kind) String() string {
	if k > KindInvalid && k < numWellKnown {
		return wellKnownNames[k]
	}
	if k >= numWellKnown {
		kindTable.RLock()
		defer kindTable.RUnlock()
		if i := int(k - numWellKnown); i < len(kindTable.names) {
			return kindTable.names[i]
		}
	}
	return fmt.Sprintf("INVALID(%d)", uint16(k))
}

// Valid reports whether k is a well-known kind or an interned free-form one.
func (k Kind) Valid() bool {
	if k == KindInvalid {
		return false
	}
	if k < numWellKnown {
		return true
	}
	kindTable.RLock()
	defer kindTable.RUnlock()
	return int(k-numWellKnown) < len(kindTable.names)
}

// IsCompute reports whether k is F, B or W: the work that makes a stage busy.
func (k Kind) IsCompute() bool { return k == F || k == B || k == W }

// IsP2P reports whether k is one of the four point-to-point kinds.
func (k Kind) IsP2P() bool { return k >= SendF && k <= RecvB }

// IsCollective reports whether k is one of the collective kinds
// (ALL_REDUCE ... COLLECTIVE).
func (k Kind) IsCollective() bool { return k >= AllReduce && k <= Collective }

// IsSend reports whether k is SEND_F or SEND_B.
func (k Kind) IsSend() bool { return k == SendF || k == SendB }

// IsRecv reports whether k is RECV_F or RECV_B.
func (k Kind) IsRecv() bool { return k == RecvF || k == RecvB }

// Counterpart returns the P2P kind that matches k on the peer (SEND_F <->
// RECV_F, SEND_B <-> RECV_B), or KindInvalid when k is not P2P.
func (k Kind) Counterpart() Kind {
	switch k {
	case SendF:
		return RecvF
	case RecvF:
		return SendF
	case SendB:
		return RecvB
	case RecvB:
		return SendB
	}
	return KindInvalid
}
