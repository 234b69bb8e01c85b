package hang

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/ppprof/ppprof/trace"
)

// resolveProgress maps each dump's progress keys (Dump.Progress) to groups
// and keeps, per (rank, group), the progress of the groups that only
// collectives use (a group that P2P ops use too counts P2P sequence numbers
// in the same counters).
//
// A key may name its group, or be the rank's local id of the group: PyTorch
// Flight Recorder keys pg_status by pg_id, which numbers the rank's own
// groups in creation order (0 the default group), while c10d names groups
// by a global creation counter. Which one a set of dumps uses is decided
// once, from evidence: a key whose last enqueued sequence number equals
// the highest one of the rank's rows in exactly one group says key ->
// group. The first reading that agrees with every such piece of evidence is
// used for every dump:
//
//  1. by name: the key is the name of a group the rank is in (also when
//     there is no evidence at all);
//  2. by position: with at least one piece of evidence, the rank's groups
//     (Options.Groups) in numeric name order are its keys in numeric order;
//  3. otherwise each dump uses its evidence alone.
func (a *analysis) resolveProgress() {
	cs := a.cs
	cs.progress = map[rankGroup]GroupProgress{}
	if len(a.opt.Dumps) == 0 {
		return
	}
	ranks := make([]trace.Rank, 0, len(a.opt.Dumps))
	for r := range a.opt.Dumps {
		if r >= 0 && int(r) < len(a.ranks) {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)

	// Evidence: key -> group name, per rank.
	type evidence struct {
		rank trace.Rank
		key  string
		name string
	}
	var ev []evidence
	for _, r := range ranks {
		for key, p := range a.opt.Dumps[r].Progress {
			if p.LastEnqueued < 0 {
				continue
			}
			match, n := "", 0
			for gid, name := range cs.names {
				if m, ok := cs.maxSeq[rankGroup{r, int32(gid)}]; ok && m == p.LastEnqueued && !cs.hasP2P[gid] {
					match = name
					n++
				}
			}
			if n == 1 {
				ev = append(ev, evidence{r, key, match})
			}
		}
	}

	byName := func(r trace.Rank, key string) string {
		if g, ok := a.opt.Groups[key]; ok && slices.Contains(g.Ranks, r) {
			return key
		}
		if gid, ok := cs.gidOf[key]; ok && slices.Contains(cs.members[gid], r) {
			return key
		}
		return ""
	}
	position := map[trace.Rank]map[string]string{}
	byPosition := func(r trace.Rank, key string) string {
		m, ok := position[r]
		if !ok {
			m = a.positionalKeys(r)
			position[r] = m
		}
		return m[key]
	}
	agrees := func(read func(trace.Rank, string) string) bool {
		for _, e := range ev {
			if read(e.rank, e.key) != e.name {
				return false
			}
		}
		return true
	}
	var read func(trace.Rank, string) string
	switch {
	case agrees(byName):
		read = byName
	case len(ev) > 0 && agrees(byPosition):
		read = byPosition
		a.note("the dumps key their progress (pg_status) by local group ids: mapped to groups by creation order, which the counters of %d keys confirm", len(ev))
	default:
		known := map[trace.Rank]map[string]string{}
		for _, e := range ev {
			if known[e.rank] == nil {
				known[e.rank] = map[string]string{}
			}
			known[e.rank][e.key] = e.name
		}
		read = func(r trace.Rank, key string) string { return known[r][key] }
		a.note("the dumps' progress keys (pg_status) match neither group names nor creation order: only the %d keys whose counters match a group's rows are used", len(ev))
	}
	for _, r := range ranks {
		for key, p := range a.opt.Dumps[r].Progress {
			name := read(r, key)
			if gid, ok := cs.gidOf[name]; ok && name != "" && !cs.hasP2P[gid] {
				cs.progress[rankGroup{r, gid}] = p
			}
		}
	}
}

// positionalKeys maps rank r's progress keys to the names of its groups by
// position: both in numeric order. Nil when some name or key is not a
// number or the counts differ.
func (a *analysis) positionalKeys(r trace.Rank) map[string]string {
	var names, keys []string
	for name, g := range a.opt.Groups {
		if slices.Contains(g.Ranks, r) {
			names = append(names, name)
		}
	}
	for key := range a.opt.Dumps[r].Progress {
		keys = append(keys, key)
	}
	if len(names) != len(keys) || !numericSort(names) || !numericSort(keys) {
		return nil
	}
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		out[k] = names[i]
	}
	return out
}

// numericSort sorts decimal strings by value; false when one is not a
// non-negative integer.
func numericSort(s []string) bool {
	v := make(map[string]int64, len(s))
	for _, x := range s {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || n < 0 {
			return false
		}
		v[x] = n
	}
	slices.SortFunc(s, func(x, y string) int { return cmp.Compare(v[x], v[y]) })
	return true
}
