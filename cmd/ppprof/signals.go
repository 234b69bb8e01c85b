package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/ppprof/ppprof/ingest"
	"github.com/ppprof/ppprof/report"
)

// cleanupSignals are the signals that end a command at a user's or a
// scheduler's request: Ctrl-C, kill, a closed terminal.
var cleanupSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// cleanupOnSignal makes the signals that end the process remove what a
// run leaves behind only when it returns, before the process dies of them
// as it would have (the shell sees 130 for Ctrl-C): the copies
// ingest.Spool made of standard input and pipes (an interrupted `ppprof
// analyze - < trace` left the trace's copy in TMPDIR), and the temporary
// files outputs are written to before they are renamed into place
// (createTemp), and the Parquet files an export is writing
// (report.RemovePartial). A signal the process was started with ignored (nohup, a
// background job) stays ignored. stop restores the signals' handling.
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
			ingest.RemoveSpooled()
			removeTemps()
			report.RemovePartial()
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

// temps holds the temporary files createTemp made that dropTemp has not
// removed yet.
var temps struct {
	sync.Mutex
	names map[string]bool
}

// createTemp creates a hidden temporary file in dir, for an output written
// whole before it is renamed into place; a signal that ends the process
// removes it (cleanupOnSignal). dropTemp removes it and forgets it.
func createTemp(dir string) (*os.File, error) {
	temps.Lock()
	defer temps.Unlock()
	f, err := os.CreateTemp(dir, ".ppprof-*.tmp")
	if err != nil {
		return nil, err
	}
	if temps.names == nil {
		temps.names = map[string]bool{}
	}
	temps.names[f.Name()] = true
	return f, nil
}

// dropTemp removes the temporary file name (if it was not renamed) and
// forgets it.
func dropTemp(name string) {
	temps.Lock()
	defer temps.Unlock()
	os.Remove(name)
	delete(temps.names, name)
}

// removeTemps removes every temporary file createTemp made and dropTemp
// has not removed.
func removeTemps() {
	temps.Lock()
	defer temps.Unlock()
	for name := range temps.names {
		os.Remove(name)
		delete(temps.names, name)
	}
}
