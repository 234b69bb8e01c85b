package collector

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// The signal watcher is process-wide: one goroutine serves every Recorder
// that asked for signals.
var sigState struct {
	sync.Mutex
	recs    map[*Recorder]bool // value: also handle SIGTERM and SIGINT
	ch      chan os.Signal
	term    bool // SIGTERM and SIGINT are being watched
	started bool
}

// watchSignals adds r to the Recorders the signal watcher serves: SIGUSR1
// dumps pending ops; with term, SIGTERM and SIGINT close every Recorder
// and then re-deliver the signal with its previous handling restored (the
// process dies of it as it would have).
func watchSignals(r *Recorder, term bool) {
	sigState.Lock()
	defer sigState.Unlock()
	if sigState.recs == nil {
		sigState.recs = map[*Recorder]bool{}
		sigState.ch = make(chan os.Signal, 4)
	}
	sigState.recs[r] = term
	if !sigState.started {
		sigState.started = true
		signal.Notify(sigState.ch, syscall.SIGUSR1)
		go serveSignals()
	}
	if term && !sigState.term {
		sigState.term = true
		signal.Notify(sigState.ch, syscall.SIGTERM, syscall.SIGINT)
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
		recs := make([]*Recorder, 0, len(sigState.recs))
		for r, term := range sigState.recs {
			if sig == syscall.SIGUSR1 || term {
				recs = append(recs, r)
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
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}
}
