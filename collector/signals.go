package collector

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// DefaultSignals are the signals a Go program usually wants a Recorder to
// handle (see Config.Signals).
var DefaultSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1}

// checkSignals accepts SIGTERM, SIGINT and SIGUSR1 only.
func checkSignals(sigs []os.Signal) error {
	for _, s := range sigs {
		if s != syscall.SIGTERM && s != syscall.SIGINT && s != syscall.SIGUSR1 {
			return fmt.Errorf("signal %v: only SIGTERM, SIGINT and SIGUSR1 can be handled", s)
		}
	}
	return nil
}

// The signal watcher is process-wide: one goroutine serves every Recorder
// that asked for signals.
var sigState struct {
	sync.Mutex
	recs    map[*Recorder][]os.Signal
	ch      chan os.Signal
	watched map[os.Signal]bool
}

// watchSignals adds r to the Recorders the signal watcher serves for sigs.
// SIGUSR1 dumps pending ops; SIGTERM and SIGINT close every Recorder that
// asked for them and then re-deliver the signal with its previous handling
// restored, so the process dies of it (or runs the handler it had) as it
// would have without the collector.
func watchSignals(r *Recorder, sigs []os.Signal) {
	if len(sigs) == 0 {
		return
	}
	sigState.Lock()
	defer sigState.Unlock()
	if sigState.recs == nil {
		sigState.recs = map[*Recorder][]os.Signal{}
		sigState.watched = map[os.Signal]bool{}
		sigState.ch = make(chan os.Signal, 4)
		go serveSignals()
	}
	sigState.recs[r] = sigs
	for _, s := range sigs {
		if !sigState.watched[s] {
			sigState.watched[s] = true
			signal.Notify(sigState.ch, s)
		}
	}
}

// unwatchSignals removes r. The handlers stay installed for the process's
// life: restoring them while another signal is in flight would lose it.
func unwatchSignals(r *Recorder) {
	sigState.Lock()
	defer sigState.Unlock()
	delete(sigState.recs, r)
}

func serveSignals() {
	for sig := range sigState.ch {
		sigState.Lock()
		var recs []*Recorder
		for r, sigs := range sigState.recs {
			for _, s := range sigs {
				if s == sig {
					recs = append(recs, r)
				}
			}
		}
		sigState.Unlock()
		if sig == syscall.SIGUSR1 {
			for _, r := range recs {
				r.DumpPending()
			}
			continue
		}
		for _, r := range recs {
			r.Close()
		}
		// Die of the signal as the process would have without us.
		sigState.Lock()
		sigState.watched[sig] = false
		signal.Reset(sig)
		sigState.Unlock()
		syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}
}
