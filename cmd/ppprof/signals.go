package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/ppprof/ppprof/internal/cleanup"
)

// cleanupSignals are the signals that end a command at a user's or a
// scheduler's request: Ctrl-C, kill, a closed terminal.
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cleanupOnSignal makes the signals that end the process remove what a
// run leaves behind only when it returns (internal/cleanup: the copies
// ingest.Spool made of standard input and pipes, outputs not yet renamed
// into place, the Parquet files an export is writing), before the process
// dies of them as it would have (the shell sees 130 for Ctrl-C). A signal
// the process was started with ignored (nohup, a background job) stays
// ignored. stop restores the signals' handling.
func cleanupOnSignal() (stop func()) {
	var sigs []os.Signal
	for _, s := range cleanupSignals {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	if len(sigs) == 0 {
		return func() {}
	}
	ch := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(ch, sigs...)
	go func() {
		select {
		case sig := <-ch:
			cleanup.RemoveAll()
			signal.Reset(sig)
			syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// createTemp creates a hidden temporary file in dir, for an output written
// whole before it is renamed into place; a signal that ends the process
// removes it (cleanupOnSignal). cleanup.Remove removes it and forgets it.
func createTemp(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".ppprof-*.tmp")
	if err != nil {
		return nil, err
	}
	cleanup.Track(f.Name())
	return f, nil
}
