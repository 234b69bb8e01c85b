package collector

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// Config configures a Recorder: who the rank is, what job it belongs to,
// where and how it writes. The zero value of every tuning field picks the
// default named beside it.
type Config struct {
	// Dir is the output directory, created if missing. The rank writes
	// Dir/rank-NNNNN.arrows (NNNNN is the rank), replacing any such file.
	Dir string

	Rank     trace.Rank  // global rank
	Stage    trace.Stage // pipeline rank (physical stage)
	Pipeline int32       // pipeline replica (data-parallel index)
	TPRank   int32       // rank inside the stage's tensor-parallel group

	// Meta is the job metadata written into the file: Job, WorldSize, PP,
	// TP, DP, CP, Virtual (model chunks per rank), MicroBatches, Schedule,
	// Device, PeakFlops. Clock, ClockOffsetNs and DroppedEvents are set by
	// the Recorder. Extra keys must hold the same value on every rank (the
	// reader refuses files that disagree).
	Meta trace.Meta

	// Clock stamps events; nil means HostClock().
	Clock Clock

	// BufferEvents is how many events may be recorded and not yet written
	// (ops in flight plus completed ops waiting for the next batch). It is
	// rounded up to a power of two; default 32768 (about 5 MiB). When it is
	// full, new events are dropped and counted, never waited for.
	BufferEvents int
	// BatchEvents: a record batch is written once this many events are
	// ready; default 4096.
	BatchEvents int
	// FlushInterval: a record batch is written at least this often while
	// events are ready; default 1s.
	FlushInterval time.Duration
	// Fsync syncs the file to disk after every batch (for node crashes; a
	// killed process loses nothing written without it).
	Fsync bool
	// Compression of record batch bodies.
	Compression arrowv1.Compression

	// WatchdogTimeout: when ops are outstanding and none has completed for
	// this long, the pending ops are written out (see Recorder) and logged.
	// Default 60s; negative disables the watchdog.
	WatchdogTimeout time.Duration

	// Signals the Recorder handles, among SIGTERM, SIGINT and SIGUSR1
	// (DefaultSignals has all three). SIGTERM and SIGINT close every
	// Recorder that handles them, then the signal is delivered again with
	// the handling the process had before, so it dies of it as before.
	// SIGUSR1 writes the pending ops (DumpPending). Handle none inside
	// runtimes that handle these signals themselves (docs/collector.md
	// says what the Python binding does).
	Signals []os.Signal

	// Log receives watchdog reports and background write errors; nil means
	// os.Stderr. Use io.Discard to silence it.
	Log io.Writer
}

// Defaults (see Config).
const (
	DefaultBufferEvents    = 32768
	DefaultBatchEvents     = 4096
	DefaultFlushInterval   = time.Second
	DefaultWatchdogTimeout = 60 * time.Second
	maxBufferEvents        = 1 << 24
)

// withDefaults checks c and fills in its defaults.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Dir == "":
		return c, errors.New("no output directory")
	case c.Rank < 0:
		return c, fmt.Errorf("rank %d: want >= 0", c.Rank)
	case c.Stage < 0:
		return c, fmt.Errorf("stage %d: want >= 0", c.Stage)
	case c.Pipeline < 0:
		return c, fmt.Errorf("pipeline %d: want >= 0", c.Pipeline)
	case c.TPRank < 0:
		return c, fmt.Errorf("tp rank %d: want >= 0", c.TPRank)
	case c.BufferEvents < 0 || c.BufferEvents > maxBufferEvents:
		return c, fmt.Errorf("buffer events %d: want 0 (default) to %d", c.BufferEvents, maxBufferEvents)
	case c.BatchEvents < 0:
		return c, fmt.Errorf("batch events %d: want >= 0", c.BatchEvents)
	case c.FlushInterval < 0:
		return c, fmt.Errorf("flush interval %v: want >= 0", c.FlushInterval)
	}
	if _, err := arrowv1.ParseCompression(string(c.Compression)); err != nil {
		return c, err
	}
	if err := checkSignals(c.Signals); err != nil {
		return c, err
	}
	if c.Clock == nil {
		c.Clock = HostClock()
	}
	if c.BufferEvents == 0 {
		c.BufferEvents = DefaultBufferEvents
	}
	n := 1
	for n < c.BufferEvents {
		n <<= 1
	}
	c.BufferEvents = n
	if c.BatchEvents == 0 {
		c.BatchEvents = DefaultBatchEvents
	}
	c.BatchEvents = min(c.BatchEvents, c.BufferEvents/2+1)
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.WatchdogTimeout == 0 {
		c.WatchdogTimeout = DefaultWatchdogTimeout
	}
	return c, nil
}
