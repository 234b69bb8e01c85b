package hang

import (
	"cmp"
	"maps"
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
//  3. otherwise each dump uses its evidence alone. Two keys of one rank
//     may then both match the same group (their counters are equal): the
//     key that is the group's name is used, as its name and its counters
//     agree; when neither is, the evidence cannot tell which key is the
//     group, so neither is used and the member's progress in the group is
//     judged from its rows, as without a dump. (Keeping whichever key came
//     last made the verdict depend on map order.)
//
// Every loop goes over the dumps by rank and over a dump's keys in sorted
// order, so the same input resolves the same way every run.
func (a *analysis) resolveProgress() {
	cs := a.cs
	cs.progress = map[rankGroup]GroupProgress{}
	if len(a.opt.Dumps) == 0 {
		return
	}
	ranks := a.dumpRanks()

	// Evidence: key -> group name, per rank.
	type evidence struct {
		rank trace.Rank
		key  string
		name string
	}
	var ev []evidence
	// Each rank's groups and its highest sequence number in each: a rank
	// is in a few groups, a fleet has thousands (looking every group up
	// for every rank was quadratic: 4.6 s for 16384 ranks).
	type groupSeq struct {
		gid int32
		max int64
	}
	ofRank := map[trace.Rank][]groupSeq{}
	for k, m := range cs.maxSeq {
		ofRank[k.rank] = append(ofRank[k.rank], groupSeq{k.gid, m})
	}
	for _, r := range ranks {
		prog := a.opt.Dumps[r].Progress
		for _, key := range slices.Sorted(maps.Keys(prog)) {
			p := prog[key]
			if p.LastEnqueued < 0 {
				continue
			}
			match, n := "", 0
			for _, g := range ofRank[r] {
				if g.max == p.LastEnqueued && !cs.hasP2P[g.gid] {
					match = cs.names[g.gid]
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
		if gid, ok := cs.gidByName[key]; ok && slices.Contains(cs.members[gid], r) {
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
		// The keys of each rank that match each group.
		type rankName struct {
			rank trace.Rank
			name string
		}
		claims := map[rankName][]string{}
		for _, e := range ev {
			rn := rankName{e.rank, e.name}
			claims[rn] = append(claims[rn], e.key)
		}
		known := map[trace.Rank]map[string]string{}
		used, ambiguous := 0, 0
		for _, e := range ev { // by rank, then key
			keys := claims[rankName{e.rank, e.name}]
			if len(keys) > 1 {
				own := slices.Contains(keys, e.name)
				if !own && e.key == keys[0] {
					ambiguous++
				}
				if !own || e.key != e.name {
					continue
				}
			}
			if known[e.rank] == nil {
				known[e.rank] = map[string]string{}
			}
			known[e.rank][e.key] = e.name
			used++
		}
		read = func(r trace.Rank, key string) string { return known[r][key] }
		a.note("the dumps' progress keys (pg_status) match neither group names nor creation order: only the %d keys whose counters match a group's rows are used", used)
		if ambiguous > 0 {
			a.note("in %d cases, several progress keys of one rank's dump match the same group by their counters and none is its name: that rank's dump progress is not used for that group", ambiguous)
		}
	}
	for _, r := range ranks {
		prog := a.opt.Dumps[r].Progress
		for _, key := range slices.Sorted(maps.Keys(prog)) {
			p := prog[key]
			name := read(r, key)
			if gid, ok := cs.gidByName[name]; ok && name != "" && !cs.hasP2P[gid] {
				cs.progress[rankGroup{r, gid}] = p
			}
		}
	}
}

// dumpRanks returns the ranks of the job that have a dump (Options.Dumps),
// increasing: every loop over the dumps goes in this order, never in map
// order, so that notes and choices are the same every run.
func (a *analysis) dumpRanks() []trace.Rank {
	ranks := make([]trace.Rank, 0, len(a.opt.Dumps))
	for r := range a.opt.Dumps {
		if r >= 0 && int(r) < len(a.ranks) {
			ranks = append(ranks, r)
		}
	}
	slices.Sort(ranks)
	return ranks
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

// numericSort sorts decimal strings by value, then ("1" and "01") as
// strings, so that the order never depends on the input's (map) order;
// false when one is not a non-negative integer.
func numericSort(s []string) bool {
	v := make(map[string]int64, len(s))
	for _, x := range s {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil || n < 0 {
			return false
		}
		v[x] = n
	}
	slices.SortFunc(s, func(x, y string) int { return cmp.Or(cmp.Compare(v[x], v[y]), cmp.Compare(x, y)) })
	return true
}
