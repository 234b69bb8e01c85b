package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/ppprof/ppprof/ingest"
)

// warnShow is how many input warnings of one kind (the same message but
// for its numbers: a warning each of 4096 ranks' dumps gives) are
// printed; the others are counted, and one line then says how many there
// were.
const warnShow = 5

// warnLimiter prints input warnings to w, at most warnShow of a kind, and
// (flush) one line per kind for those not printed.
type warnLimiter struct {
	w      io.Writer
	before func() // called before a line is printed (erases a progress bar); may be nil
	mu     sync.Mutex
	count  map[string]int
	hidden []*hiddenWarns // kinds with warnings not printed since the last flush, by first
	byKind map[string]*hiddenWarns
}

type hiddenWarns struct {
	kind string
	n    int
}

func newWarnLimiter(w io.Writer, before func()) *warnLimiter {
	return &warnLimiter{w: w, before: before, count: map[string]int{}, byKind: map[string]*hiddenWarns{}}
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// warnKind is a warning's message with each number (a run of digits not
// after a letter) replaced by N.
func warnKind(msg string) string {
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		// A run of digits after a letter is part of a word ("P2P").
		if c := msg[i]; c >= '0' && c <= '9' && (i == 0 || !isLetter(msg[i-1])) {
			for i+1 < len(msg) && msg[i+1] >= '0' && msg[i+1] <= '9' {
				i++
			}
			b = append(b, 'N')
			continue
		}
		b = append(b, msg[i])
	}
	return string(b)
}

func (l *warnLimiter) warn(w ingest.Warning) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := warnKind(w.Message)
	l.count[k]++
	if l.count[k] <= warnShow {
		if l.before != nil {
			l.before()
		}
		fmt.Fprintf(l.w, "ppprof: warning: %s: %s\n", w.Path, w.Message)
		return
	}
	h := l.byKind[k]
	if h == nil {
		h = &hiddenWarns{kind: k}
		l.byKind[k] = h
		l.hidden = append(l.hidden, h)
	}
	h.n++
}

// flush prints, for each kind of warning not all printed, how many were
// not.
func (l *warnLimiter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range l.hidden {
		if l.before != nil {
			l.before()
		}
		fmt.Fprintf(l.w, "ppprof: warning: %d more warnings like %q not shown (%d of this kind in all)\n", h.n, h.kind, l.count[h.kind])
	}
	l.hidden, l.byKind = nil, map[string]*hiddenWarns{}
}
