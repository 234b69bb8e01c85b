package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/ppprof/ppprof/trace"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// The Arrow inputs of these tests are written with arrowv1 into temporary
// directories. Only TestArrowWrongColumnType uses arrow-go directly, to
// write a schema arrowv1 would never write.

func arrowStream(t testing.TB, tr *trace.Trace, opt arrowv1.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := arrowv1.WriteStream(&b, tr, opt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func arrowFile(t testing.TB, tr *trace.Trace, opt arrowv1.Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := arrowv1.WriteFile(&b, tr, opt); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// jobMeta is the metadata every rank of the test job writes.
func jobMeta() trace.Meta {
	return trace.Meta{Schema: 1, Job: "test-job", WorldSize: 6, PP: 6, Schedule: "1f1b",
		Clock: trace.ClockCUDAEvent, ClockOffsetNs: 1500, Extra: map[string]string{"collector": "go"}}
}

// TestOpenRankStreams writes one file per rank in every Arrow flavour (file
// and stream, uncompressed, LZ4, ZSTD, gzip), named so that name order is
// not rank order, and opens the directory: the merge must equal the
// original trace, with the per-rank dropped_events summed.
func TestOpenRankStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	full := randomTrace(rng, 6, 50)
	dir := t.TempDir()
	var dropped int64
	for r := trace.Rank(0); r < 6; r++ {
		part := rankSlice(full, r)
		part.Meta = jobMeta()
		part.Meta.DroppedEvents = int64(r)
		dropped += int64(r)
		var data []byte
		switch r {
		case 0:
			data = arrowStream(t, part, arrowv1.Options{})
		case 1:
			data = arrowStream(t, part, arrowv1.Options{Compression: arrowv1.LZ4, BatchRows: 7})
		case 2:
			data = arrowStream(t, part, arrowv1.Options{Compression: arrowv1.ZSTD, BatchRows: 3})
		case 3:
			data = arrowFile(t, part, arrowv1.Options{BatchRows: 5})
		case 4:
			data = arrowFile(t, part, arrowv1.Options{Compression: arrowv1.LZ4})
		case 5:
			data = gzipBytes(t, arrowStream(t, part, arrowv1.Options{BatchRows: 4}))
		}
		writeFile(t, dir, fmt.Sprintf("rank-%05d.arrows", 5-r), data) // misleading names
	}
	res, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := full.Slice(0, full.Len())
	want.Meta = jobMeta()
	want.Meta.DroppedEvents = dropped
	if d := trace.Diff(want, res.Trace); d != "" {
		t.Fatalf("merged trace: %s", d)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings: %v", res.Warnings)
	}
	var got []string
	for _, f := range res.Files {
		got = append(got, fmt.Sprintf("%s:%s:%v:%v", filepath.Base(f.Path), f.Format, f.Ranks, f.Compressed))
	}
	wantFiles := "rank-00000.arrows:arrow-stream:[5]:true rank-00001.arrows:arrow-file:[4]:false " +
		"rank-00002.arrows:arrow-file:[3]:false rank-00003.arrows:arrow-stream:[2]:false " +
		"rank-00004.arrows:arrow-stream:[1]:false rank-00005.arrows:arrow-stream:[0]:false"
	if strings.Join(got, " ") != wantFiles {
		t.Errorf("files\n%s\nwant\n%s", strings.Join(got, " "), wantFiles)
	}
	if b := res.Files[2].Batches; b != (rankSlice(full, 3).Len()+4)/5 {
		t.Errorf("rank 3: %d batches for %d rows of 5", b, rankSlice(full, 3).Len())
	}
}

// fEvents returns n forward events of rank r, one kind only, so that every
// batch of a stream is the same size and no dictionary delta comes between
// batches.
func fEvents(r trace.Rank, n int) *trace.Trace {
	t := &trace.Trace{Meta: jobMeta()}
	for i := 0; i < n; i++ {
		t.Append(trace.Event{Rank: r, Stage: trace.Stage(r), Kind: trace.F, Seq: int64(i), MicroBatch: trace.MicroBatch(i),
			IssueNs: int64(i) * 100, StartNs: int64(i) * 100, EndNs: int64(i)*100 + 90, Peer: trace.NoRank})
	}
	return t
}

// streamBatches writes tr as a stream of batches of size rows without
// closing it, and returns the bytes and the length after the schema and
// after each batch.
func streamBatches(t testing.TB, tr *trace.Trace, size int) ([]byte, []int) {
	t.Helper()
	var b bytes.Buffer
	sw, err := arrowv1.NewStreamWriter(&b, tr.Meta, arrowv1.Options{BatchRows: size})
	if err != nil {
		t.Fatal(err)
	}
	ends := []int{b.Len()}
	for from := 0; from < tr.Len(); from += size {
		if err := sw.Write(tr.Slice(from, min(from+size, tr.Len()))); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, b.Len())
	}
	return b.Bytes(), ends
}

// TestOpenTruncatedStream cuts rank 1's stream in the middle of its sixth
// batch: Open keeps the five complete batches, warns with the bytes lost,
// and still merges rank 0.
func TestOpenTruncatedStream(t *testing.T) {
	dir := t.TempDir()
	p0 := writeFile(t, dir, "rank-00000.arrows", arrowStream(t, fEvents(0, 40), arrowv1.Options{BatchRows: 5}))
	data, ends := streamBatches(t, fEvents(1, 40), 5)
	cut := (ends[5] + ends[6]) / 2
	p1 := writeFile(t, dir, "rank-00001.arrows", data[:cut])

	var warned []Warning
	res, err := Open([]string{dir}, Options{Warn: func(w Warning) { warned = append(warned, w) }})
	if err != nil {
		t.Fatal(err)
	}
	lost := cut - ends[5]
	want := Warning{Path: p1, Message: fmt.Sprintf("truncated stream: kept 5 complete batches (25 events), lost %d of %d bytes (%.1f%%)",
		lost, cut, 100*float64(lost)/float64(cut))}
	if len(warned) != 1 || warned[0] != want {
		t.Fatalf("warnings %v\nwant %v", warned, want)
	}
	if res.Trace.Len() != 65 {
		t.Errorf("%d events, want 40 + 25", res.Trace.Len())
	}
	f := res.Files[1]
	if f.Path != p1 || !f.Truncated || f.BytesLost != int64(lost) || f.Batches != 5 || f.Events != 25 {
		t.Errorf("file info %+v", f)
	}
	if res.Files[0].Path != p0 || res.Files[0].Truncated {
		t.Errorf("file info %+v", res.Files[0])
	}
}

// TestOpenUnclosedStream reads a stream whose writer wrote three batches
// and never closed it (the job hung): every batch is kept, with a warning.
func TestOpenUnclosedStream(t *testing.T) {
	dir := t.TempDir()
	data, _ := streamBatches(t, fEvents(2, 15), 5)
	p := writeFile(t, dir, "rank-00002.arrows", data)
	res, err := Open([]string{p}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Warning{{Path: p, Message: "stream not closed: the writer did not finish; kept all 3 batches (15 events)"}}
	if fmt.Sprint(res.Warnings) != fmt.Sprint(want) {
		t.Errorf("warnings %v\nwant %v", res.Warnings, want)
	}
	if res.Trace.Len() != 15 || !res.Files[0].Truncated || res.Files[0].BytesLost != 0 {
		t.Errorf("%d events, file %+v", res.Trace.Len(), res.Files[0])
	}
}

// TestOpenArrowErrors checks the Arrow failures that must be errors naming
// the file: corrupt data, a newer schema major version, a metadata conflict
// and a rank in two files.
func TestOpenArrowErrors(t *testing.T) {
	dir := t.TempDir()
	good := arrowStream(t, fEvents(0, 20), arrowv1.Options{BatchRows: 5})

	t.Run("newer schema", func(t *testing.T) {
		tr := fEvents(0, 3)
		tr.Meta.Schema = 2
		p := writeFile(t, dir, "v2.arrows", arrowStream(t, tr, arrowv1.Options{}))
		_, err := Open([]string{p}, Options{})
		var sv *trace.SchemaVersionError
		if !errors.As(err, &sv) || sv.Got != 2 {
			t.Fatalf("%v is not a *trace.SchemaVersionError for version 2", err)
		}
		if !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("%q does not name the file", err)
		}
	})
	t.Run("metadata conflict", func(t *testing.T) {
		a, b := fEvents(0, 3), fEvents(1, 3)
		b.Meta.PP = 2
		pa := writeFile(t, dir, "conflict/a", arrowStream(t, a, arrowv1.Options{}))
		pb := writeFile(t, dir, "conflict/b", arrowFile(t, b, arrowv1.Options{}))
		_, err := Open([]string{filepath.Dir(pa)}, Options{})
		want := fmt.Sprintf(`files disagree on metadata pp: "6" in %s, "2" in %s (are they from the same job?)`, pa, pb)
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
		var mc *trace.MetaConflictError
		if !errors.As(err, &mc) {
			t.Errorf("%T does not unwrap to *trace.MetaConflictError", err)
		}
	})
	t.Run("same rank twice", func(t *testing.T) {
		pa := writeFile(t, dir, "dup/rank-00000.arrows", good)
		pb := writeFile(t, dir, "dup/rank-00000-retry.arrows", arrowFile(t, fEvents(0, 2), arrowv1.Options{}))
		_, err := Open([]string{filepath.Dir(pa)}, Options{})
		want := fmt.Sprintf("rank 0 is in two files: %s and %s (one job's files must hold disjoint ranks)", pb, pa)
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	})
	t.Run("corrupt", func(t *testing.T) {
		// Overwrite 16 bytes at many places: each must give an error naming
		// the file, or (if the damage hit only padding or values) a valid
		// trace; never a panic.
		errs := 0
		for off := 0; off+16 <= len(good); off += 12 {
			bad := append([]byte{}, good...)
			for i := off; i < off+16; i++ {
				bad[i] ^= 0xa5
			}
			p := writeFile(t, dir, "corrupt.arrows", bad)
			res, err := Open([]string{p}, Options{})
			if err != nil {
				errs++
				if !strings.HasPrefix(err.Error(), p+": ") && !strings.HasPrefix(err.Error(), "no events") {
					t.Errorf("offset %d: %q does not name the file", off, err)
				}
				if strings.Contains(err.Error(), "panicked") {
					t.Errorf("offset %d: %v", off, err)
				}
				continue
			}
			if err := res.Trace.Validate(); err != nil {
				t.Errorf("offset %d: accepted an invalid trace: %v", off, err)
			}
		}
		if errs == 0 {
			t.Error("no corruption was noticed")
		}
	})
	t.Run("corrupt schema", func(t *testing.T) {
		bad := append([]byte{}, good...)
		for i := 40; i < 60; i++ {
			bad[i] ^= 0xa5
		}
		p := writeFile(t, dir, "schema/rank-00000.arrows", bad)
		want := p + ": corrupt Arrow stream: it starts with the Arrow continuation marker, but its first message is not a valid schema"
		// Named directly or found in a directory: an error either way, not
		// a skipped "not a trace".
		for _, arg := range []string{p, filepath.Dir(p)} {
			if _, err := Open([]string{arg}, Options{}); err == nil || err.Error() != want {
				t.Errorf("Open(%s): got %v\nwant %s", arg, err, want)
			}
		}
	})
	t.Run("arrow magic then garbage", func(t *testing.T) {
		p := writeFile(t, dir, "garbage.arrow", []byte("ARROW1\x00\x00this is not a flatbuffer at all........"))
		_, err := Open([]string{p}, Options{})
		if err == nil || !strings.HasPrefix(err.Error(), p+": ") {
			t.Errorf("got %v, want an error naming %s", err, p)
		}
	})
}

// TestArrowWrongColumnType writes, with arrow-go, a stream whose rank
// column is utf8 instead of int32: the error names the file and the column.
func TestArrowWrongColumnType(t *testing.T) {
	base := arrowv1.Schema(trace.Meta{Schema: 1})
	fields := base.Fields()
	for i := range fields {
		if fields[i].Name == "rank" {
			fields[i].Type = arrow.BinaryTypes.String
		}
	}
	md := base.Metadata()
	schema := arrow.NewSchema(fields, &md)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	rb := array.NewRecordBuilder(mem, schema)
	defer rb.Release()
	for i, f := range schema.Fields() {
		switch b := rb.Field(i).(type) {
		case *array.Int32Builder:
			b.Append(0)
		case *array.Int64Builder:
			b.Append(1)
		case *array.Float64Builder:
			b.Append(0)
		case *array.StringBuilder:
			b.Append("0")
		case *array.BinaryDictionaryBuilder:
			if err := b.AppendString("F"); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("column %s: builder %T", f.Name, b)
		}
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, t.TempDir(), "rank-00000.arrows", buf.Bytes())
	_, _, _, err := ReadFile(p)
	var ce *arrowv1.ColumnError
	if !errors.As(err, &ce) {
		t.Fatalf("%v (%T) is not an *arrowv1.ColumnError", err, err)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, p+": ") || !strings.Contains(msg, "rank") {
		t.Errorf("%q does not name the file and the rank column", msg)
	}
}

// TestOpenSchemaCut: in a directory, a rank file cut inside its schema
// message is skipped with a warning; named directly, it is an error.
func TestOpenSchemaCut(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "rank-00000.arrows", arrowStream(t, fEvents(0, 4), arrowv1.Options{}))
	cut := writeFile(t, dir, "rank-00001.arrows", arrowStream(t, fEvents(1, 4), arrowv1.Options{})[:20])
	res, err := Open([]string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := cut + ": skipped: Arrow data cut off before the end of its schema: no events"
	if len(res.Warnings) != 1 || res.Warnings[0].String() != want {
		t.Errorf("warnings %v, want [%s]", res.Warnings, want)
	}
	if _, err := Open([]string{cut}, Options{}); err == nil || !strings.HasPrefix(err.Error(), cut+": ") || !errors.Is(err, arrowv1.ErrNoSchema) {
		t.Errorf("named directly: %v, want arrowv1.ErrNoSchema naming the file", err)
	}
}

// TestOpenManyRanks opens 64 per-rank streams through a pattern, every
// eighth one left unclosed: the merge is ordered by (rank, seq) and the
// warnings come in file order, however the parallel reads finish.
func TestOpenManyRanks(t *testing.T) {
	const n = 64
	dir := t.TempDir()
	var wantWarn []string
	for i := 0; i < n; i++ {
		r := trace.Rank((i * 37) % n) // file i holds a scrambled rank
		tr := fEvents(r, 10)
		tr.Meta.WorldSize = n
		name := fmt.Sprintf("rank-%05d.arrows", i)
		if i%8 == 3 {
			data, _ := streamBatches(t, tr, 4)
			p := writeFile(t, dir, name, data)
			wantWarn = append(wantWarn, p+": stream not closed: the writer did not finish; kept all 3 batches (10 events)")
		} else {
			writeFile(t, dir, name, arrowStream(t, tr, arrowv1.Options{}))
		}
	}
	var warned []string
	res, err := Open([]string{filepath.Join(dir, "rank-*.arrows")}, Options{Warn: func(w Warning) { warned = append(warned, w.String()) }})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(warned, "\n") != strings.Join(wantWarn, "\n") {
		t.Errorf("warnings\n%s\nwant\n%s", strings.Join(warned, "\n"), strings.Join(wantWarn, "\n"))
	}
	tr := res.Trace
	if tr.Len() != n*10 || tr.Meta.WorldSize != n {
		t.Fatalf("%d events, world size %d", tr.Len(), tr.Meta.WorldSize)
	}
	for i := 0; i < tr.Len(); i++ {
		if want := (trace.Rank(i / 10)); tr.Rank[i] != want || tr.Seq[i] != int64(i%10) {
			t.Fatalf("row %d: rank %d seq %d, want rank %d seq %d", i, tr.Rank[i], tr.Seq[i], want, i%10)
		}
	}
	for i, f := range res.Files {
		if want := fmt.Sprintf("rank-%05d.arrows", i); filepath.Base(f.Path) != want {
			t.Fatalf("file %d is %s, want %s", i, f.Path, want)
		}
	}
}
