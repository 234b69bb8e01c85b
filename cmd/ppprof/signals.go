package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/ppprof/ppprof/ingest"
)

// cleanupSignals are the signals that end a command reading traces at a
// user's or a scheduler's request: Ctrl-C, kill, a closed terminal.
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// removeSpooledOnSignal makes the signals that end the process remove
// the copies ingest.Spool made of standard input and pipes before the
// process dies of them as it would have (the shell sees 130 for Ctrl-C):
// without it, an interrupted `ppprof analyze - < trace` leaves the
// trace's copy in TMPDIR. A signal the process was started with ignored
// (nohup, a background job) stays ignored. stop restores the signals'
// handling; it is to be called when the command's reading is done.
func removeSpooledOnSignal() (stop func()) {
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
			ingest.RemoveSpooled()
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
