package ingest

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
)

// pickleSeeds are real and hand-made pickles: the shared Megatron dumps
// (torch's pickler), the fixtures (Python's, protocols 2 and 4), a dump
// frdump writes, and opcode sequences the fast decoder must refuse or
// get right (memoized containers used twice, odd SETITEMS, marks, deep
// nesting, LONG1 of every size, protocol 6).
func pickleSeeds(t testing.TB) [][]byte {
	var out [][]byte
	paths, _ := filepath.Glob("../../shared/data/flight_recorder/*/_dump_*")
	paths = append(paths, "testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 2, TP: 2, MicroBatches: 2}, Layers: 1}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "_dump_1"))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, b)
	deep := []byte{0x80, 2}
	for range 70 {
		deep = append(deep, ']', '(')
	}
	for range 70 {
		deep = append(deep, 'e')
	}
	for _, s := range []string{
		"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01h\x00u.", // a dict inside itself, by memo
		"\x80\x02]q\x00(K\x01e]q\x01(h\x00h\x00e.",      // one list twice, by memo
		"\x80\x02]q\x00K\x01a2.",                        // DUP
		"\x80\x02}(K\x01K\x02X\x01\x00\x00\x001K\x03u.", // keys 1 and "1"
		"\x80\x02}(K\x01u.",                             // odd SETITEMS
		"\x80\x02(K\x01q\x00.",                          // BINPUT above a mark
		"\x80\x02K\x01(.",                               // STOP on an empty frame
		"\x80\x02K\x01(\x85.",                           // TUPLE1 across a mark
		"\x80\x02]K\x01(a.",                             // APPEND across a mark
		"\x80\x02}((K\x01K\x02u.",                       // SETITEMS under another mark
		"\x80\x06K\x01.",                                // protocol 6
		"\x80\x02\x8a\x00.",                             // LONG1 of no bytes
		"\x80\x02\x8a\x01\xff\x8a\x02\x00\x80\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x87.",
		"\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01.", // LONG1 past int64
		"\x80\x02J\xff\xff\xff\xffG?\xf0\x00\x00\x00\x00\x00\x00\x86.",
		"\x80\x02N\x88\x89)\x87q\x00h\x00\x86.", // a tuple memoized, used again
		"\x80\x02Nq\x05h\x05h\x06\x86.",         // None memoized; an unset slot
		"\x80\x02(K\x01K\x02l(K\x03t(X\x01\x00\x00\x00kK\x04d\x87.",
		"\x80\x02]K\x01K\x020a.",  // POP
		"\x80\x02](K\x01K\x021e.", // POP_MARK
		"\x80\x02\x95\x05\x00\x00\x00\x00\x00\x00\x00\x8c\x02hi\x94h\x00\x86.",
		"\x80\x02T\x02\x00\x00\x00hi.",                       // BINSTRING: the generic path
		"\x80\x04\x95\xff\x00\x00\x00\x00\x00\x00\x00K\x01.", // a frame longer than the data
		string(deep),
		// Entries whose unread keys hold containers (skipped by
		// loadFRPickle), and misuses of them the generic path refuses.
		frEntries("X\x03\x00\x00\x00out](](K\x01K\x02e(K\x03K\x04t}(K\x01K\x02uM\x00\x10e" + "X\x01\x00\x00\x00zG?\xf0\x00\x00\x00\x00\x00\x00" + "X\x05\x00\x00\x00stateX\x03\x00\x00\x00abc"),
		frEntries("X\x03\x00\x00\x00out}(K\x01e"),                                                      // APPENDS to a dict
		frEntries("X\x03\x00\x00\x00out](K\x01K\x02u"),                                                 // SETITEMS to a list
		frEntries("X\x03\x00\x00\x00out}(K\x01u"),                                                      // odd SETITEMS
		frEntries("X\x03\x00\x00\x00out(K\x01K\x02d"),                                                  // DICT from a mark
		frEntries("X\x03\x00\x00\x00out(K\x01d"),                                                       // odd DICT
		frEntries("X\x03\x00\x00\x00out]K\x07as"),                                                      // APPEND, then SETITEM of... a list
		frEntries("X\x03\x00\x00\x00outJ\x00\x00\x01\x00q\x07" + "X\x08\x00\x00\x00state_idh\x07"),     // a skipped number memoized, used again
		frEntries("X\x0b\x00\x00\x00input_sizesX\x01\x00\x00\x00aX\x05\x00\x00\x00op_idM\x00\x10\x87"), // an unread key and its value taken into a read one
	} {
		out = append(out, []byte(s))
	}
	return out
}

// frEntries is a dump whose one entry holds profiling_name and the keys
// and values of kv (pickle opcodes), then a time.
func frEntries(kv string) string {
	return "\x80\x02}(X\x07\x00\x00\x00entries](}(X\x0e\x00\x00\x00profiling_nameX\x0e\x00\x00\x00nccl:send 0->1" +
		kv + "X\x0f\x00\x00\x00time_created_nsJ\x05\x00\x00\x00ueu."
}

// samePlain is reflect.DeepEqual for plain values, except that a NaN
// equals a NaN (a pickle's float may be one: BINFLOAT of any bits).
func samePlain(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.IsNaN(x) && math.IsNaN(y))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !samePlain(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !samePlain(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// checkFastPickle is the fast decoder's contract: when it decodes data,
// the generic path gives the same values (and does not fail).
func checkFastPickle(t *testing.T, data []byte) (fast bool) {
	v, ok := fastPickle(data)
	if !ok {
		return false
	}
	if err := checkPickle(data); err != nil {
		t.Fatalf("fast path decoded %q as %#v; checkPickle refuses it: %v", data, v, err)
	}
	want, err := slowPickle(data)
	if err != nil {
		t.Fatalf("fast path decoded %q as %#v; the generic path fails: %v", data, v, err)
	}
	if !samePlain(v, want) {
		t.Fatalf("fast path decoded %q as %#v; the generic path as %#v", data, v, want)
	}
	return true
}

// checkFRPickle is loadFRPickle's contract: the generic path's values,
// except that entries may be frEntry values holding what the dicts hold
// under the keys readFlightRecorder reads. It returns how many entries
// were decoded straight into frEntry.
func checkFRPickle(t *testing.T, data []byte) (direct int) {
	v, err := loadFRPickle(data)
	want, werr := func() (any, error) {
		if err := checkPickle(data); err != nil {
			return nil, err
		}
		return slowPickle(data)
	}()
	if (err == nil) != (werr == nil) {
		t.Fatalf("loadFRPickle(%q): error %v; the generic path's %v", data, err, werr)
	}
	if err != nil {
		return 0
	}
	got, wm := asMap(v), asMap(want)
	if (got == nil) != (wm == nil) {
		t.Fatalf("loadFRPickle(%q) = %#v; the generic path %#v", data, v, want)
	}
	if got == nil {
		if !samePlain(v, want) {
			t.Fatalf("loadFRPickle(%q) = %#v; the generic path %#v", data, v, want)
		}
		return 0
	}
	ge, we := asList(got["entries"]), asList(wm["entries"])
	if len(ge) != len(we) {
		t.Fatalf("%d entries, the generic path %d", len(ge), len(we))
	}
	for i := range ge {
		g := ge[i]
		if e, ok := g.(*frEntry); ok {
			direct++
			m, isMap := we[i].(map[string]any)
			if !isMap || !reflect.DeepEqual(*e, entryOf(m)) {
				t.Fatalf("entry %d: %#v; the generic path %#v", i, *e, we[i])
			}
		} else if !samePlain(g, we[i]) {
			t.Fatalf("entry %d: %#v; the generic path %#v", i, g, we[i])
		}
	}
	for k := range got {
		if k != "entries" && !samePlain(got[k], wm[k]) {
			t.Fatalf("key %q: %#v; the generic path %#v", k, got[k], wm[k])
		}
	}
	if len(got) != len(wm) {
		t.Fatalf("%d keys, the generic path %d", len(got), len(wm))
	}
	return direct
}

func TestFRPickle(t *testing.T) {
	for _, b := range pickleSeeds(t) {
		checkFRPickle(t, b)
	}
	// Every entry of a dump laid out as torch's is decoded into its fields:
	// the fast path is not one that never runs. (The shared Megatron dumps,
	// when ../shared is there, are among the seeds above too.)
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 4, TP: 2, MicroBatches: 8, Steps: 2}, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "_dump_3"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := loadFRPickle(b)
	if err != nil {
		t.Fatal(err)
	}
	entries := asList(asMap(v)["entries"])
	if direct := checkFRPickle(t, b); len(entries) < 100 || direct != len(entries) {
		t.Errorf("%d of %d entries decoded into frEntry", direct, len(entries))
	}
}

func TestFastPickle(t *testing.T) {
	fast := 0
	for _, b := range pickleSeeds(t) {
		if checkFastPickle(t, b) {
			fast++
		}
		// loadPickle gives the generic path's answer either way.
		v, err := loadPickle(b)
		want, werr := func() (any, error) {
			if err := checkPickle(b); err != nil {
				return nil, err
			}
			return slowPickle(b)
		}()
		if (err == nil) != (werr == nil) || err == nil && !samePlain(v, want) {
			t.Errorf("loadPickle(%q) = %#v, %v; the generic path %#v, %v", b, v, err, want, werr)
		}
	}
	// Every real dump (and frdump's) takes the fast path: it is not a
	// path that never runs.
	paths, _ := filepath.Glob("../../shared/data/flight_recorder/*/_dump_*")
	for _, p := range append(paths, "testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0") {
		b, _ := os.ReadFile(p)
		if _, ok := fastPickle(b); !ok {
			t.Errorf("%s: the fast decoder gave up", p)
		}
	}
	if fast < len(paths)+5 {
		t.Errorf("only %d seeds decoded fast", fast)
	}
}

// FuzzFastPickle checks the fast decoder against the generic path on
// mutations of real and hand-made pickles.
func FuzzFastPickle(f *testing.F) {
	for _, b := range pickleSeeds(f) {
		f.Add(b)
	}
	// Dumps whose entries repeat values, for the value cache.
	g := &pickleGen{rng: rand.New(rand.NewPCG(3, 4))}
	for range 16 {
		f.Add(g.dump(2 + g.rng.IntN(12)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Contains(data, []byte("panic")) || strings.Count(string(data), "(") > 1000 {
			return
		}
		checkFastPickle(t, data)
		checkFRPickle(t, data)
	})
}
