package trace

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// SchemaMajor is the major version of the trace schema this package models.
// A trace from a newer major version is refused by every reader.
const SchemaMajor = 1

// Clock names the time base of a trace's timestamps.
type Clock string

// The clocks a collector can use.
const (
	ClockCUDAEvent Clock = "cuda-event" // device times from CUDA events, anchored to host time
	ClockHost      Clock = "host"       // the host's monotonic clock
	ClockVirtual   Clock = "virtual"    // simulated time
)

// Metadata keys, as stored on the Arrow schema (DESIGN.md "The event model").
const (
	KeySchema        = "ppprof.schema"
	KeyJob           = "job"
	KeyWorldSize     = "world_size"
	KeyPP            = "pp"
	KeyTP            = "tp"
	KeyDP            = "dp"
	KeyCP            = "cp"
	KeyVirtual       = "virtual"
	KeyMicroBatches  = "microbatches"
	KeySchedule      = "schedule"
	KeyDevice        = "device"
	KeyPeakFlops     = "peak_flops"
	KeyClock         = "clock"
	KeyClockOffsetNs = "clock_offset_ns"
	KeyDroppedEvents = "dropped_events"
)

// Meta is a trace's job-level metadata. Zero fields are unknown and are not
// written. Keys this version does not know are kept in Extra, so a reader
// passes them through unchanged.
type Meta struct {
	Schema        int     // ppprof.schema major version; SchemaMajor when written by us
	Job           string  // free-form job name
	WorldSize     int     // number of ranks
	PP            int     // pipeline stages
	TP            int     // tensor-parallel degree
	DP            int     // data-parallel degree (pipeline replicas)
	CP            int     // context-parallel degree
	Virtual       int     // model chunks per rank (interleaved schedules)
	MicroBatches  int     // micro-batches per step
	Schedule      string  // gpipe, 1f1b, interleaved, zb-h1, or a runtime's own name
	Device        string  // e.g. "H100-SXM"
	PeakFlops     float64 // peak FLOP/s of one device, for MFU
	Clock         Clock
	ClockOffsetNs int64 // host minus device time, ns, when Clock is cuda-event
	DroppedEvents int64 // events the collector dropped because its buffer was full
	Extra         map[string]string
}

// Map returns the metadata as key/value strings, with only known non-zero
// fields and every Extra key. The schema key is always present.
func (m Meta) Map() map[string]string {
	kv := make(map[string]string, len(m.Extra)+16)
	for k, v := range m.Extra {
		kv[k] = v
	}
	schema := m.Schema
	if schema == 0 {
		schema = SchemaMajor
	}
	kv[KeySchema] = strconv.Itoa(schema)
	putS := func(k, v string) {
		if v != "" {
			kv[k] = v
		}
	}
	putI := func(k string, v int64) {
		if v != 0 {
			kv[k] = strconv.FormatInt(v, 10)
		}
	}
	putS(KeyJob, m.Job)
	putI(KeyWorldSize, int64(m.WorldSize))
	putI(KeyPP, int64(m.PP))
	putI(KeyTP, int64(m.TP))
	putI(KeyDP, int64(m.DP))
	putI(KeyCP, int64(m.CP))
	putI(KeyVirtual, int64(m.Virtual))
	putI(KeyMicroBatches, int64(m.MicroBatches))
	putS(KeySchedule, m.Schedule)
	putS(KeyDevice, m.Device)
	if m.PeakFlops != 0 {
		kv[KeyPeakFlops] = strconv.FormatFloat(m.PeakFlops, 'g', -1, 64)
	}
	putS(KeyClock, string(m.Clock))
	putI(KeyClockOffsetNs, m.ClockOffsetNs)
	putI(KeyDroppedEvents, m.DroppedEvents)
	return kv
}

// Keys returns the keys of kv in sorted order, for deterministic output.
func Keys(kv map[string]string) []string {
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SchemaVersionError says a trace was written with a schema major version
// this build cannot read.
type SchemaVersionError struct {
	Got int // the major version in the trace
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("trace schema version %d is newer than this ppprof reads (%d): upgrade ppprof", e.Got, SchemaMajor)
}

// ParseMeta reads metadata from key/value strings. A missing schema key, a
// malformed number or a schema major version newer than SchemaMajor is an
// error. Unknown keys go to Extra.
func ParseMeta(kv map[string]string) (Meta, error) {
	var m Meta
	s, ok := kv[KeySchema]
	if !ok {
		return m, fmt.Errorf("metadata has no %q key: not a ppprof trace", KeySchema)
	}
	v, err := parseSchemaVersion(s)
	if err != nil {
		return m, err
	}
	if v > SchemaMajor {
		return m, &SchemaVersionError{Got: v}
	}
	m.Schema = v
	for _, k := range Keys(kv) {
		val := kv[k]
		var err error
		switch k {
		case KeySchema:
		case KeyJob:
			m.Job = val
		case KeyWorldSize:
			m.WorldSize, err = parseCount(k, val)
		case KeyPP:
			m.PP, err = parseCount(k, val)
		case KeyTP:
			m.TP, err = parseCount(k, val)
		case KeyDP:
			m.DP, err = parseCount(k, val)
		case KeyCP:
			m.CP, err = parseCount(k, val)
		case KeyVirtual:
			m.Virtual, err = parseCount(k, val)
		case KeyMicroBatches:
			m.MicroBatches, err = parseCount(k, val)
		case KeySchedule:
			m.Schedule = val
		case KeyDevice:
			m.Device = val
		case KeyPeakFlops:
			m.PeakFlops, err = strconv.ParseFloat(val, 64)
			if err == nil && (m.PeakFlops < 0 || math.IsInf(m.PeakFlops, 0) || math.IsNaN(m.PeakFlops)) {
				err = fmt.Errorf("metadata %s=%q: want a finite non-negative number", k, val)
			} else if err != nil {
				err = fmt.Errorf("metadata %s=%q: not a number", k, val)
			}
		case KeyClock:
			m.Clock = Clock(val)
		case KeyClockOffsetNs:
			m.ClockOffsetNs, err = strconv.ParseInt(val, 10, 64)
			if err != nil {
				err = fmt.Errorf("metadata %s=%q: not an integer", k, val)
			}
		case KeyDroppedEvents:
			m.DroppedEvents, err = strconv.ParseInt(val, 10, 64)
			if err != nil || m.DroppedEvents < 0 {
				err = fmt.Errorf("metadata %s=%q: want a non-negative integer", k, val)
			}
		default:
			if m.Extra == nil {
				m.Extra = map[string]string{}
			}
			m.Extra[k] = val
		}
		if err != nil {
			return m, err
		}
	}
	return m, nil
}

// parseSchemaVersion accepts "1" and, for forward compatibility, "1.2"
// (major.minor): only the major version decides readability.
func parseSchemaVersion(s string) (int, error) {
	major := s
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			major = s[:i]
			break
		}
	}
	v, err := strconv.Atoi(major)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("metadata %s=%q: not a schema version", KeySchema, s)
	}
	return v, nil
}

func parseCount(k, v string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("metadata %s=%q: want a non-negative integer", k, v)
	}
	return int(n), nil
}
