//go:build cgo

package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ppprof/ppprof/collector"
	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// clockSpec is the clock a config asks for; ppprof_init opens it.
type clockSpec struct {
	clock        string // auto, host, cuda, virtual
	cuda         collector.CUDAOptions
	virtualStart int64
}

// parseConfig reads ppprof_init's "key=value;key=value" configuration
// (pairs separated by ';' or newlines; blank pairs ignored). Every key may
// appear once; an unknown key is an error, so a typo is not silently lost.
func parseConfig(s string) (collector.Config, clockSpec, error) {
	cfg := collector.Config{Log: os.Stderr}
	spec := clockSpec{clock: "auto"}
	seen := map[string]bool{}
	for _, pair := range strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == '\n' }) {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return cfg, spec, fmt.Errorf("%q: want key=value", pair)
		}
		if seen[k] {
			return cfg, spec, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		if err := setKey(&cfg, &spec, k, v); err != nil {
			return cfg, spec, fmt.Errorf("%s=%q: %w", k, v, err)
		}
	}
	if cfg.Dir == "" {
		return cfg, spec, fmt.Errorf("dir is required")
	}
	return cfg, spec, nil
}

func setKey(cfg *collector.Config, spec *clockSpec, k, v string) error {
	i32 := func(p *int32) error {
		n, err := strconv.ParseInt(v, 10, 32)
		*p = int32(n)
		return err
	}
	count := func(p *int) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err == nil && n < 0 {
			return fmt.Errorf("want >= 0")
		}
		*p = int(n)
		return err
	}
	ms := func(p *time.Duration) error {
		n, err := strconv.ParseInt(v, 10, 64)
		*p = time.Duration(n) * time.Millisecond
		return err
	}
	m := &cfg.Meta
	switch k {
	case "dir":
		cfg.Dir = v
	case "rank":
		return i32((*int32)(&cfg.Rank))
	case "stage":
		return i32((*int32)(&cfg.Stage))
	case "pipeline":
		return i32(&cfg.Pipeline)
	case "tp_rank":
		return i32(&cfg.TPRank)
	case "job":
		m.Job = v
	case "world_size":
		return count(&m.WorldSize)
	case "pp":
		return count(&m.PP)
	case "tp":
		return count(&m.TP)
	case "dp":
		return count(&m.DP)
	case "cp":
		return count(&m.CP)
	case "virtual":
		return count(&m.Virtual)
	case "microbatches":
		return count(&m.MicroBatches)
	case "schedule":
		m.Schedule = v
	case "device":
		m.Device = v
	case "peak_flops":
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && f < 0 {
			return fmt.Errorf("want >= 0")
		}
		m.PeakFlops = f
		return err
	case "clock":
		switch v {
		case "auto", "host", "cuda", "virtual":
			spec.clock = v
		case string(trace.ClockCUDAEvent):
			spec.clock = "cuda"
		default:
			return fmt.Errorf("want auto, host, cuda or virtual")
		}
	case "cuda_library":
		spec.cuda.Library = v
	case "cuda_api":
		spec.cuda.API = v
	case "cuda_device":
		return count(&spec.cuda.Device)
	case "anchor_interval_ms":
		return ms(&spec.cuda.AnchorInterval)
	case "virtual_start_ns":
		n, err := strconv.ParseInt(v, 10, 64)
		spec.virtualStart = n
		return err
	case "buffer_events":
		return count(&cfg.BufferEvents)
	case "batch_events":
		return count(&cfg.BatchEvents)
	case "flush_ms":
		return ms(&cfg.FlushInterval)
	case "fsync":
		b, err := strconv.ParseBool(v)
		cfg.Fsync = b
		return err
	case "compression":
		c, err := arrowv1.ParseCompression(v)
		cfg.Compression = c
		return err
	case "watchdog_ms":
		return ms(&cfg.WatchdogTimeout)
	case "signals":
		return setSignals(cfg, v)
	case "log":
		switch v {
		case "stderr":
			cfg.Log = os.Stderr
		case "none":
			cfg.Log = io.Discard
		default:
			return fmt.Errorf("want stderr or none")
		}
	default:
		return fmt.Errorf("unknown key")
	}
	return nil
}

// setSignals reads "none", "all" or a comma-separated list of usr1, term,
// int.
func setSignals(cfg *collector.Config, v string) error {
	cfg.Signals = nil
	for _, s := range strings.Split(v, ",") {
		switch strings.TrimSpace(s) {
		case "none", "":
		case "all":
			cfg.Signals = append(cfg.Signals, collector.DefaultSignals...)
		case "usr1":
			cfg.Signals = append(cfg.Signals, syscall.SIGUSR1)
		case "term":
			cfg.Signals = append(cfg.Signals, syscall.SIGTERM)
		case "int":
			cfg.Signals = append(cfg.Signals, syscall.SIGINT)
		default:
			return fmt.Errorf("signal %q: want none, all, usr1, term or int", s)
		}
	}
	return nil
}
