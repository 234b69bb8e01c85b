package trace

import (
	"strings"
	"sync"
	"sync/atomic"
)

// Str is a string of the trace's string columns (Shape, Dtype, Group) as
// the id of one copy of it in a process-wide table: 4 bytes a row instead
// of a 16-byte string header, no pointers for the collector to scan, and
// equal strings are equal ids. The zero Str is "". Ids are given out as
// strings are first met (Intern) and never taken back: the strings of
// these columns are few (shapes, dtypes, process group names). The table
// is not bounded: a process that reads many traces keeps every distinct
// string it met (as a trace held its own copies while it lived); the
// ppprof command reads one job per process.
type Str uint32

// strTable is the process-wide table: all[id] is id's string, ids[s] is
// s's id. all is replaced (never changed in place) when it grows, so
// String reads it without a lock.
var strTable struct {
	mu  sync.RWMutex
	ids map[string]Str
	all atomic.Pointer[[]string]
}

func init() {
	all := []string{""}
	strTable.all.Store(&all)
	strTable.ids = map[string]Str{"": 0}
}

// Intern returns s's id, giving it one if it has none.
func Intern(s string) Str {
	if s == "" {
		return 0
	}
	strTable.mu.RLock()
	id, ok := strTable.ids[s]
	strTable.mu.RUnlock()
	if ok {
		return id
	}
	return internSlow(s)
}

// InternBytes is Intern of string(b), without copying b when b's string
// has an id already.
func InternBytes(b []byte) Str {
	if len(b) == 0 {
		return 0
	}
	strTable.mu.RLock()
	id, ok := strTable.ids[string(b)]
	strTable.mu.RUnlock()
	if ok {
		return id
	}
	return internSlow(string(b))
}

func internSlow(s string) Str {
	strTable.mu.Lock()
	defer strTable.mu.Unlock()
	if id, ok := strTable.ids[s]; ok {
		return id
	}
	// s may alias memory that changes or goes away (an Arrow buffer, a
	// mapped file): the table keeps a copy of its own.
	s = strings.Clone(s)
	old := *strTable.all.Load()
	if uint64(len(old)) > uint64(^Str(0)) {
		panic("trace: more than 2^32 distinct strings")
	}
	id := Str(len(old))
	all := append(old, s) // a new array when old is full: readers keep theirs
	strTable.all.Store(&all)
	strTable.ids[s] = id
	return id
}

// String returns the string s stands for ("" for an id never given out).
func (s Str) String() string {
	all := *strTable.all.Load()
	if int(s) < len(all) {
		return all[s]
	}
	return ""
}

// MarshalText writes s as its string (not its id, which depends on the
// order the process met its strings).
func (s Str) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a string written by MarshalText.
func (s *Str) UnmarshalText(b []byte) error {
	*s = InternBytes(b)
	return nil
}
