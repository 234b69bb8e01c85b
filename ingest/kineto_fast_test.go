package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// The fast Kineto path (kineto_scan.go) must give what the generic decoder
// gives, for every input: these tests run both on the same bytes.

// kfRead reads data with the fast or the slow path, through wrap (a reader
// that splits or cuts the data) when not nil.
func kfRead(data []byte, kineto, fast bool, wrap func(io.Reader) io.Reader) (*part, error) {
	var r io.Reader = bytes.NewReader(data)
	if wrap != nil {
		r = wrap(r)
	}
	opt := kinetoOpts{mapper: newMapper(nil), kineto: kineto}
	if fast {
		return readKineto("rank3.json", r, opt)
	}
	return readKinetoSlow("rank3.json", r, opt)
}

// kfSame fails t unless the fast and slow paths agree on data: the same
// error text, or the same part (rows, pending P2P, warnings, info, groups).
func kfSame(t testing.TB, name string, data []byte, wrap func(io.Reader) io.Reader) {
	t.Helper()
	for _, kineto := range []bool{true, false} {
		ps, errS := kfRead(data, kineto, false, wrap)
		pf, errF := kfRead(data, kineto, true, wrap)
		if (errS == nil) != (errF == nil) || errS != nil && errS.Error() != errF.Error() {
			t.Fatalf("%s (kineto %v): errors differ:\nslow: %v\nfast: %v", name, kineto, errS, errF)
		}
		if errS != nil {
			continue
		}
		if !reflect.DeepEqual(ps, pf) {
			t.Fatalf("%s (kineto %v): parts differ:\nslow: %s\nfast: %s", name, kineto, kfDescribe(ps), kfDescribe(pf))
		}
	}
}

// kfDescribe prints a part for a failure message.
func kfDescribe(p *part) string {
	var b strings.Builder
	fmt.Fprintf(&b, "info %+v\n", p.info)
	for _, w := range p.warns {
		fmt.Fprintf(&b, "warn %s\n", w.Message)
	}
	for i := 0; i < p.t.Len() && i < 50; i++ {
		fmt.Fprintf(&b, "row %+v\n", p.t.At(i))
	}
	fmt.Fprintf(&b, "%d rows, %d pending, comms %+v", p.t.Len(), len(p.pending), p.comms)
	return b.String()
}

// kfFixtures returns the Chrome-trace JSON files of the repository and of
// ../shared/data (when present), decompressed, by name.
func kfFixtures(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{
		"ppRank0":      ppRank(0, 0, true),
		"ppRank1":      ppRank(1, 12.5, false),
		"pippy-seed":   []byte(`[{"name": "F_0,0", "ph": "X", "ts": 1649317709410899.2, "dur": 10, "pid": "0", "tid": "0"}, {"name": "B_1,0", "ph": "X", "ts": 2, "dur": 1, "pid": "0", "tid": "1"}]`),
		"comms-id":     []byte(`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 200, "dur": 100, "args": {"Comms Id": 10159970886766084423}}]}`),
		"megatron":     megatronSeed(),
		"kinetoLarge":  kfLargeKineto(t, 200<<10),
		"kinetoPretty": kfPretty(kfLargeKineto(t, 100<<10)),
	}
	var paths []string
	for _, pat := range []string{"testdata/torchprof/*.json*", "../../shared/data/kineto/*.json*", "../../shared/data/kineto/*/*.json*",
		"../../shared/data/pippy/*.json*", "../../shared/data/megatron_timeline/*.json*"} {
		m, _ := filepath.Glob(pat)
		paths = append(paths, m...)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(p, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		out[p] = b
	}
	return out
}

// kfLargeKineto returns a synthetic Kineto trace of about size bytes (the
// benchmark's generator).
func kfLargeKineto(t testing.TB, size int64) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rank0.pt.trace.json")
	writeLargeKineto(t, path, size)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kfPretty indents JSON (whitespace before and after every token).
func kfPretty(b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, b, " \t", "   "); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// TestKinetoFastMatchesSlow runs both paths on every fixture, whole, read
// a byte at a time, cut short, and with read errors.
func TestKinetoFastMatchesSlow(t *testing.T) {
	fx := kfFixtures(t)
	names := make([]string, 0, len(fx))
	for n := range fx {
		names = append(names, n)
	}
	sort.Strings(names)
	boom := errors.New("boom")
	for _, n := range names {
		data := fx[n]
		t.Run(filepath.Base(n), func(t *testing.T) {
			kfSame(t, n, data, nil)
			if len(data) < 1<<20 {
				kfSame(t, n+" one byte at a time", data, iotest.OneByteReader)
			}
			kfSame(t, n+" half reads", data, iotest.HalfReader)
			kfSame(t, n+" data with EOF", data, iotest.DataErrReader)
			rng := rand.New(rand.NewPCG(uint64(len(data)), 1))
			cuts := 20
			if len(data) > 1<<20 || testing.Short() {
				cuts = 4 // the generic path reads a big sample in a second or so
			}
			for range cuts {
				cut := rng.IntN(len(data) + 1)
				kfSame(t, fmt.Sprintf("%s cut at %d", n, cut), data[:cut], nil)
				kfSame(t, fmt.Sprintf("%s read error at %d", n, cut), data, func(r io.Reader) io.Reader {
					return io.MultiReader(io.LimitReader(r, int64(cut)), kfErrReader{boom})
				})
			}
		})
	}
}

// TestKinetoFastCorrupt: a byte changed anywhere in a trace (an invalid
// character, a quote, a bracket, a digit) gives the same error, byte
// offset included, or the same rows.
func TestKinetoFastCorrupt(t *testing.T) {
	fx := kfFixtures(t)
	rng := rand.New(rand.NewPCG(7, 7))
	repl := []byte(`x"{}[],:0-.e\ ` + "\n\x01\xff")
	for _, n := range []string{"ppRank0", "kinetoLarge", "kinetoPretty", "megatron"} {
		data := fx[n]
		for range 150 {
			b := bytes.Clone(data)
			at := rng.IntN(len(b))
			b[at] = repl[rng.IntN(len(repl))]
			kfSame(t, fmt.Sprintf("%s with %q at %d", n, b[at], at), b, nil)
		}
	}
}

// TestKinetoFastSmallBuffer repeats the fixtures with a tiny starting
// buffer, so that every event slides or grows it.
func TestKinetoFastSmallBuffer(t *testing.T) {
	defer func(n int) { kfBufSize = n }(kfBufSize)
	kfBufSize = 16
	fx := kfFixtures(t)
	for _, n := range []string{"ppRank0", "ppRank1", "kinetoLarge", "kinetoPretty", "megatron", "comms-id"} {
		kfSame(t, n, fx[n], nil)
		kfSame(t, n+" half reads", fx[n], iotest.HalfReader)
		for _, cut := range []int{len(fx[n]) / 3, len(fx[n]) - 5} {
			kfSame(t, fmt.Sprintf("%s cut at %d", n, cut), fx[n][:cut], nil)
		}
	}
}

// kfVariant re-writes a JSON value with its keys shuffled, random
// whitespace, strings partly escaped, numbers in other spellings, keys
// repeated, nulls and nested args added.
type kfVariant struct {
	rng *rand.Rand
	b   bytes.Buffer
}

func (v *kfVariant) ws() {
	if v.rng.IntN(4) == 0 {
		v.b.WriteString([]string{" ", "\n", "\t", "\r\n  ", "  "}[v.rng.IntN(5)])
	}
}

func (v *kfVariant) str(s string) {
	v.b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			v.b.WriteByte('\\')
			v.b.WriteRune(r)
		case r < 0x20:
			fmt.Fprintf(&v.b, `\u%04x`, r)
		case v.rng.IntN(40) == 0 && r < 0x10000:
			fmt.Fprintf(&v.b, `\u%04X`, r)
		case v.rng.IntN(80) == 0 && r == '/':
			v.b.WriteString(`\/`)
		default:
			v.b.WriteRune(r)
		}
	}
	v.b.WriteByte('"')
}

func (v *kfVariant) num(n json.Number) {
	s := string(n)
	switch v.rng.IntN(6) {
	case 0: // exponent form of the same value
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			s = strconv.FormatFloat(f, 'e', -1, 64)
		}
	case 1:
		if !strings.ContainsAny(s, ".eE") {
			s += "E0"
		}
	case 2:
		if !strings.ContainsAny(s, "eE") && !strings.Contains(s, ".") {
			s += ".0000"
		}
	case 3:
		if !strings.ContainsAny(s, "eE") && strings.Contains(s, ".") {
			s += "51" // more decimals: rounding on the fourth
		}
	}
	v.b.WriteString(s)
}

func (v *kfVariant) value(x any, depth int) {
	v.ws()
	switch x := x.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		v.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		v.b.WriteByte('{')
		first := true
		member := func(k string, val any) {
			if !first {
				v.ws()
				v.b.WriteByte(',')
			}
			first = false
			v.ws()
			v.str(k)
			v.ws()
			v.b.WriteByte(':')
			v.value(val, depth+1)
		}
		for _, k := range keys {
			switch v.rng.IntN(30) {
			case 0: // a duplicate: the earlier value is overwritten
				member(k, "dup")
			case 1:
				member(k, nil)
			case 2:
				member(strings.ToUpper(k), x[k]) // a key encoding/json folds onto a field
			case 3:
				member("extra", map[string]any{"a": []any{1.5, "x", nil, true, map[string]any{"b": []any{}}}})
			}
			member(k, x[k])
		}
		v.ws()
		v.b.WriteByte('}')
	case []any:
		v.b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				v.ws()
				v.b.WriteByte(',')
			}
			v.value(e, depth+1)
		}
		v.ws()
		v.b.WriteByte(']')
	case string:
		v.str(x)
	case json.Number:
		v.num(x)
	case bool:
		v.b.WriteString(strconv.FormatBool(x))
	case nil:
		v.b.WriteString("null")
	}
	v.ws()
}

// kfVary returns a variant of the JSON data.
func kfVary(t testing.TB, data []byte, seed uint64) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		t.Fatal(err)
	}
	v := &kfVariant{rng: rand.New(rand.NewPCG(seed, 3))}
	v.value(x, 0)
	return v.b.Bytes()
}

// TestKinetoFastVariants: re-spelled fixtures (key order, whitespace,
// escapes, exponents, duplicates, nulls, folded keys, nested args) read
// the same on both paths.
func TestKinetoFastVariants(t *testing.T) {
	fx := kfFixtures(t)
	for _, n := range []string{"ppRank0", "ppRank1", "pippy-seed", "comms-id", "megatron", "kinetoLarge", "testdata/torchprof/rank0.pt.trace.json.gz"} {
		data, ok := fx[n]
		if !ok {
			continue
		}
		for seed := range uint64(8) {
			v := kfVary(t, data, seed)
			kfSame(t, fmt.Sprintf("%s variant %d", n, seed), v, nil)
			kfSame(t, fmt.Sprintf("%s variant %d cut", n, seed), v[:len(v)*2/3], nil)
		}
	}
}

// TestKinetoFastEdges: hand-written corners of the layout.
func TestKinetoFastEdges(t *testing.T) {
	ev := `{"ph":"X","cat":"user_annotation","name":"PP:0F0","ts":1,"dur":2,"pid":1,"tid":1,"args":{"External id":1}}`
	for _, s := range []string{
		``, ` `, `x`, `1`, `"s"`, `null`, `[]`, `{}`, `[`, `{`, `[]]`, `{"traceEvents":[]}`, `{"traceEvents":[]`, `{"traceEvents":[]]`,
		`{"traceEvents":[]}garbage`, `{"traceEvents":[],}`, `{"traceEvents":{}}`, `{"traceEvents":"x"}`, `{"traceEvents":[],"traceEvents":[` + ev + `]}`,
		`[` + ev + `]`, `[` + ev + `,]`, `[` + ev + `,` + ev + `]x`, `[` + ev + ` ` + ev + `]`, `[` + ev + `,null,` + ev + `]`, `[` + ev + `,1]`, `[` + ev + `,[]]`,
		`{"traceEvents":[` + ev + `],"distributedInfo":{"rank":2},"deviceProperties":[{"name":"H100"}],"baseTimeNanoseconds":5}`,
		`{"traceEvents":[` + ev + `],"deviceProperties":[{"name":1}]}`, `{"traceEvents":[` + ev + `],"deviceProperties":{}}`,
		`{"traceEvents":[` + ev + `],"deviceProperties":[{"name":"a"}],"deviceProperties":[{"name":""}]}`,
		`{"traceEvents":[` + ev + `],"distributedInfo":null}`, `{"traceEvents":[` + ev + `], "x": 1.}`, `{"traceEvents":[` + ev + `], "x": 01}`,
		`{"traceEvents":[` + ev + `] "x": 1}`, `{"traceEvents":[` + ev + `], 1: 1}`, `{"traceEvents":[` + ev + `], "x" 1}`, `{"traceEvents":[` + ev + `], "x": tru}`,
		`{"a":0,"traceEvents":[` + ev + `],"b":[` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `]}`,
		`{"traceEvents":[{"name":"a","name":null}]}`, `{"traceEvents":[{"name":1}]}`, `{"traceEvents":[{"ts":"1"}]}`, `{"traceEvents":[{"Name":"x"}]}`,
		`{"traceEvents":[{"n\u0061me":"PP:0F0","ph":"X","ts":1}]}`, `{"traceEvents":[{"name":"PP:0F\u0030","ph":"X","ts":1}]}`,
		`{"traceEvents":[{"name":"\xff","ph":"X","ts":1,"cat":"user_annotation"}]}`, `{"traceEvents":[{"name":"é","ph":"X","ts":1,"cat":"user_annotation"}]}`,
		`{"traceEvents":[{"t\u017f":5,"ph":"X"}]}`, `{"traceEvents":[{"tſ":5,"ph":"X"}]}`,
		`{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1,"pid":1,"tid":"a","args":{"correlation":5,"Correlation":6}}]}`,
		`{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1,"pid":1,"tid":"\u0061","args":{"correlation":"7"}}]}`,
		`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":{"Collective\u0020name":"x","External id":3}}]}`,
		`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":1,"args":[1]}]}`,
		`{"traceEvents":[{"ph":"X","ts":1e3,"dur":-2,"name":"PP:0F0","cat":"user_annotation"},{"ph":"X","ts":"12.5","name":"PP:0B0","cat":"user_annotation"}]}`,
		`{"traceEvents":[{"ph":"X","ts":-1.00005,"name":"PP:0F0","cat":"user_annotation"},{"ph":"X","ts":1234567890123456789,"name":"PP:0B0","cat":"user_annotation"}]}`,
		`{"traceEvents":[{"ph":"X","ts":12.9995,"name":"PP:0F0","cat":"user_annotation"},{"ph":"X","ts":0.0001,"name":"PP:0B0","cat":"user_annotation"}]}`,
		`{"traceEvents":[{"ph":"M","name":"process_name","pid":3,"args":{"name":"x"}},{"ph":"M","name":"process_name","pid":3,"args":[]}]}`,
		`{"traceEvents":[{"ph":"X","name":"ProfilerStep#3","ts":0,"dur":100,"cat":"user_annotation"},{"ph":"X","name":"ProfilerStep#x","ts":0,"cat":"user_annotation"}]}`,
		`{"traceEvents":[{"ph":"X","name":"a\u0000b","ts":0,"cat":"user_annotation"},{"ph":"X","name":"a` + "\x01" + `b","ts":0}]}`,
		`{"traceEvents":[{"ph":"X","name":"a\qb","ts":0}]}`, `{"traceEvents":[{"ph":"X","name":"a\u12","ts":0}]}`,
	} {
		kfSame(t, s, []byte(s), nil)
	}
}

// TestKinetoFastPlan: the synthetic prefix puts a json.Decoder at the
// input offset and scanned-byte count asked for, and the next syntax
// errors carry the offsets they would have had.
func TestKinetoFastPlan(t *testing.T) {
	w := int64(kfPadRun)
	for _, c := range []struct {
		state kfState
		b, u  int64
		loose bool // too few separators to keep every run of spaces short
	}{
		{kfBareArrComma, 2, 1, false}, {kfBareArrComma, 3, 1, false}, {kfBareArrComma, 100, 2, false}, {kfBareArrComma, 3*w + 7, 1, true},
		{kfBareArrComma, 2*w + 1, 9*w + 5, false}, {kfBareArrComma, 5, 20*w + 3, false}, {kfBareArrComma, 3*w + 7, 5, false},
		{kfObjArrComma, 15, 3, false}, {kfObjArrComma, 4*w + 1, 3, true}, {kfObjArrComma, 4*w + 1, 4*w + 2, false}, {kfObjArrComma, 20, 11 * w, false},
		{kfObjComma, 4, 2, false}, {kfObjComma, 17, 5, false}, {kfObjComma, 5*w + 3, 2, true}, {kfObjComma, 5*w + 3, 7*w + 1, false},
		{kfObjComma, 40, 20 * w, true}, {kfObjComma, 40 * w, 20 * w, false}, {kfObjComma, 5*w + 3, 12, false},
	} {
		ops := kfPlan(c.state, c.b, c.u)
		// A continuation whose first error is a scanned-count offset, then one whose error is an input offset.
		for _, cont := range []struct {
			text string
			want int64
		}{{`,{"a":x}`, c.b + 6}, {`x`, c.b + c.u}} {
			text := cont.text
			if c.state == kfObjComma && text != "x" {
				text = `,"k":[x]`
			}
			dec := json.NewDecoder(io.MultiReader(&kfSynth{ops: ops}, strings.NewReader(text)))
			var dummy struct{}
			for _, op := range ops {
				var err error
				if op.tok {
					_, err = dec.Token()
				} else {
					err = dec.Decode(&dummy)
				}
				if err != nil {
					t.Fatalf("%+v: consuming the prefix: %v", c, err)
				}
			}
			if got := dec.InputOffset(); got != c.b+c.u {
				t.Fatalf("%+v: input offset %d, want %d", c, got, c.b+c.u)
			}
			var err error
			if c.state == kfObjComma {
				if _, err = dec.Token(); err == nil {
					err = dec.Decode(&dummy)
				}
			} else {
				err = dec.Decode(&dummy)
			}
			var se *json.SyntaxError
			want := cont.want
			if c.state == kfObjComma && cont.text != "x" {
				want = c.b + 3 + 2 // "k" scanned, then [x up to the x
			}
			if !errors.As(err, &se) || se.Offset != want {
				t.Errorf("%+v, then %q: error %v (offset %v), want a syntax error at %d", c, text, err, se, want)
			}
		}
		longest := int64(0)
		for _, op := range ops {
			longest = max(longest, op.ws1, op.ws2)
		}
		if longest > w && !c.loose {
			t.Errorf("%+v: a run of %d spaces", c, longest)
		}
	}
}

// FuzzKinetoFastMatchesSlow: on any input the fast path gives what the
// generic decoder gives, and neither panics.
func FuzzKinetoFastMatchesSlow(f *testing.F) {
	f.Add(ppRank(0, 0, true))
	f.Add(ppRank(1, 12.5, false))
	f.Add(megatronSeed())
	f.Add([]byte(`[{"name": "F_0,0", "ph": "X", "ts": 1649317709410899.2, "dur": 10, "pid": "0", "tid": "0"}, {"name": "B_1,0", "ph": "X", "ts": 2, "dur": 1, "pid": "0", "tid": "1"}]`))
	f.Add([]byte(`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 200, "dur": 100, "args": {"Comms Id": 10159970886766084423}}]}`))
	f.Add([]byte(`{"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","ts":1.5,"pid":1,"tid":2,"args":{"correlation":5}},{"ph":"X","cat":"kernel","name":"nccl","ts":2,"dur":1,"args":{"correlation":5,"External id":1}}],"distributedInfo":{"rank":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kfSame(t, "input", data, nil)
		// A read error somewhere (the place taken from the data).
		h := uint64(len(data))
		for _, c := range data {
			h = h*31 + uint64(c)
		}
		at := int64(h % uint64(len(data)+1))
		kfSame(t, fmt.Sprintf("input, read error at %d", at), data, func(r io.Reader) io.Reader {
			return io.MultiReader(io.LimitReader(r, at), kfErrReader{errors.New("boom")})
		})
		// Valid JSON: a variant with its keys shuffled and spelled
		// otherwise.
		if json.Valid(data) {
			kfSame(t, "variant", kfVary(t, data, h), nil)
		}
		// Again with a tiny buffer that every event slides or grows, the
		// data arriving in small reads.
		defer func(n int) { kfBufSize = n }(kfBufSize)
		kfBufSize = 8
		kfSame(t, "input, small buffer", data, iotest.HalfReader)
	})
}

// TestKinetoFastLateErrors: errors and cuts far into a trace (past the
// generic decoder's buffering of a synthetic prefix), in the event array,
// in the top-level keys after it, and in the bare-array form, keep their
// wording and byte offsets.
func TestKinetoFastLateErrors(t *testing.T) {
	big := kfLargeKineto(t, 300<<10)
	end := bytes.LastIndexByte(big, ']')
	head := bytes.Index(big, []byte(`"traceEvents": [`)) + len(`"traceEvents": `)
	bare := big[head : end+1]
	tails := []string{`]}`, `], "traceName": "x", "displayTimeUnit": "ms"}`, `], "traceName": "x", "bad": tru}`, `], "traceName": "x" "y": 1}`,
		`], "traceName": "x", "deviceProperties": [{"name": 5}]}`, `], "baseTimeNanoseconds": 1e, "x": 1}`, `],  ` + "\n\t" + `"traceName": "x",,}`,
		`], "traceName": "x", "traceEvents": {}}`, `], "traceName": "x", "traceEvents": [{"ph": "X"}, 5]}`, `], "traceName": "x", "traceEvents": [`,
		`,]}`, `, {"ph": "X", "name": 7}]}`, `, {"ph": "X"} {"ph": "X"}]}`, `, nul]}`, `]`, `], "traceName": "x", `, `], "a": [` + strings.Repeat(`{"b": [1, 2.5e3, "c\n"]}, `, 4000) + `{}], "z": !}`,
	}
	for _, tail := range tails {
		doc := append(bytes.Clone(big[:end]), tail...)
		kfSame(t, "object ending "+tail, doc, nil)
		kfSame(t, "object ending "+tail+", cut", doc[:len(doc)-3], nil)
		kfSame(t, "object ending "+tail+", read error", doc, func(r io.Reader) io.Reader {
			return io.MultiReader(io.LimitReader(r, int64(len(doc)-2)), kfErrReader{errors.New("boom")})
		})
	}
	for _, tail := range []string{`]`, `]garbage`, `,]`, `, 5]`, `, {"ph": "X"}`, `, {"ph": "X"}, `, `, {"ph": "X", "ts": 1.5e}]`} {
		doc := append(bytes.Clone(bare[:len(bare)-1]), tail...)
		kfSame(t, "bare array ending "+tail, doc, nil)
		kfSame(t, "bare array ending "+tail+", pretty", append(kfPrettyPrefix(bare[:len(bare)-1]), tail...), nil)
	}
}

// kfPrettyPrefix indents the events of an unterminated bare array.
func kfPrettyPrefix(b []byte) []byte {
	return bytes.TrimSuffix(kfPretty(append(bytes.Clone(b), ']')), []byte("]"))
}

// TestKinetoFastNumbers: kfMicros and kfInt read what parseMicros and
// rawInt read.
func TestKinetoFastNumbers(t *testing.T) {
	in := []string{"", "0", "1", "-1", "12.5", "12.", ".5", "1.0005", "1.0004", "1.9995", "999999999999999", "9999999999999999", "99999999999999999999",
		"123456789012345.9999", "1e3", "1E-3", "-0", "00", `"12.5"`, `"1"`, `" 1"`, "null", "true", `"`, "1.5.5", "1x", "4458676524648.797",
		"1649317709410899.2", "+5", "999999999999999999", "9223372036854775807", "9223372036854775808", "-9223372036854775808"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(20) {
			b.WriteByte("0123456789.-e\""[rng.IntN(14)])
		}
		in = append(in, b.String())
	}
	for _, s := range in {
		wn, wok := parseMicros([]byte(s))
		gn, gok := kfMicros([]byte(s))
		if wn != gn || wok != gok {
			t.Errorf("kfMicros(%q) = %d, %v; parseMicros says %d, %v", s, gn, gok, wn, wok)
		}
		wi, wok := rawInt([]byte(s))
		gi, gok := kfInt([]byte(s))
		if wi != gi || wok != gok {
			t.Errorf("kfInt(%q) = %d, %v; rawInt says %d, %v", s, gi, gok, wi, wok)
		}
	}
}
