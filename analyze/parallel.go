package analyze

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Per-window work runs on a pool of goroutines; results are written by
// window index and reduced in window order afterwards, so a report does not
// depend on GOMAXPROCS or on scheduling: the sums a pass forms are the same
// sums, in the same order, as a serial loop forms.

// workers returns how many goroutines forEach uses for n items: GOMAXPROCS,
// at most n, at least 1.
func workers(n int) int {
	return max(1, min(runtime.GOMAXPROCS(0), n))
}

// forEach calls fn(w, k) once for every k in [0, n), on workers(n)
// goroutines; w in [0, workers(n)) names the goroutine, so fn can keep
// per-goroutine scratch in a slice indexed by w. Items are handed out one
// at a time from a shared counter, so a slow window does not hold up the
// others. forEach returns when every call has returned.
func forEach(n int, fn func(w, k int)) { forEachN(n, workers(n), fn) }

// forEachN is forEach on at most nw goroutines (at least one).
func forEachN(n, nw int, fn func(w, k int)) {
	nw = max(1, min(nw, workers(n)))
	if nw == 1 {
		for k := range n {
			fn(0, k)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				fn(w, k)
			}
		}()
	}
	wg.Wait()
}

// unionScratch holds the buffers unionRuns reuses.
type unionScratch struct {
	runs, next [][]interval
	a, b       []interval
}

// unionRuns returns the union of ivs as disjoint intervals sorted by start
// (touching intervals merged), the same list union returns. ivs is the
// concatenation of runs each sorted by start (one run per rank of a stage,
// in seq order), which it merges pairwise instead of sorting: linear per
// level, log2(runs) levels. The result aliases ivs or sc; ivs is modified.
func unionRuns(ivs []interval, sc *unionScratch) []interval {
	sc.runs = sc.runs[:0]
	lo := 0
	for i := 1; i <= len(ivs); i++ {
		if i == len(ivs) || ivs[i].s < ivs[i-1].s {
			sc.runs = append(sc.runs, unionSorted(ivs[lo:i]))
			lo = i
		}
	}
	switch len(sc.runs) {
	case 0:
		return ivs[:0]
	case 1:
		return sc.runs[0]
	}
	if cap(sc.a) < len(ivs) {
		sc.a = make([]interval, 0, len(ivs))
		sc.b = make([]interval, 0, len(ivs))
	}
	// Each level reads the buffer the previous one wrote and writes the
	// other; both hold len(ivs), so appends never reallocate.
	bufs := [2][]interval{sc.a, sc.b}
	for cur := 0; len(sc.runs) > 1; cur ^= 1 {
		dst := bufs[cur][:0]
		sc.next = sc.next[:0]
		for i := 0; i < len(sc.runs); i += 2 {
			from := len(dst)
			if i+1 == len(sc.runs) {
				dst = append(dst, sc.runs[i]...)
			} else {
				dst = mergeUnion(dst, sc.runs[i], sc.runs[i+1])
			}
			sc.next = append(sc.next, dst[from:len(dst):len(dst)])
		}
		sc.runs, sc.next = sc.next, sc.runs
	}
	return sc.runs[0]
}

// unionSorted merges ivs, sorted by start, in place into disjoint
// intervals (touching ones merged) and returns them.
func unionSorted(ivs []interval) []interval {
	n := 0
	for _, iv := range ivs {
		if n > 0 && iv.s <= ivs[n-1].e {
			ivs[n-1].e = max(ivs[n-1].e, iv.e)
			continue
		}
		ivs[n] = iv
		n++
	}
	return ivs[:n]
}

// mergeUnion appends to dst the union of a and b, each disjoint and sorted
// by start, as disjoint sorted intervals (touching ones merged).
func mergeUnion(dst, a, b []interval) []interval {
	first := len(dst)
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var iv interval
		if j == len(b) || i < len(a) && a[i].s <= b[j].s {
			iv = a[i]
			i++
		} else {
			iv = b[j]
			j++
		}
		if n := len(dst); n > first && iv.s <= dst[n-1].e {
			dst[n-1].e = max(dst[n-1].e, iv.e)
			continue
		}
		dst = append(dst, iv)
	}
	return dst
}
