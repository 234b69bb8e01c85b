package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSniff checks format recognition by content on small inputs.
func TestSniff(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Format
	}{
		{"csv", "rank,stage,step,kind,seq,start_ns,end_ns\n0,0,0,F,0,0,1\n", FormatCSV},
		{"csv any order, spaces", "kind, seq, rank\n", FormatCSV},
		{"csv quoted header", `"rank","kind"` + "\n", FormatCSV},
		{"csv with BOM", "\ufeffrank,kind\n", FormatCSV},
		{"csv header cut", "rank,kind,se", FormatCSV},
		{"csv header cut in kind", "rank,ki", FormatUnknown},
		{"csv without kind", "rank,stage\n", FormatUnknown},
		{"jsonl", `{"rank":0,"kind":"F"}` + "\n", FormatJSONL},
		{"jsonl leading blank lines", "\n\n  {\"rank\":0}\n", FormatJSONL},
		{"jsonl cut", `{"rank":0,"ki`, FormatJSONL},
		{"pretty json", "{\n  \"rank\": 0\n}\n", FormatUnknown},
		{"kineto", `{"schemaVersion": 1, "traceEvents": [`, FormatKineto},
		{"chrome later key", `{"foo": {"a": [1, 2]}, "traceEvents": []}`, FormatChromeTrace},
		{"kineto by category", `{"traceEvents": [{"name": "aten::mm", "cat": "cpu_op", "ph": "X"}]}`, FormatKineto},
		{"megatron array", `[{"name":"forward-compute","ph":"X","ts":1,"dur":2,"args":{"step":0}}]`, FormatMegatron},
		{"megatron object cut", `{"traceEvents": [{"name":"backward-send","ph":"X"}, {"name":"for`, FormatMegatron},
		{"flight recorder json", `{"version": "2.9", "pg_config": {}, "entries": [`, FormatFRJSON},
		{"flight recorder pickle", "\x80\x02}q\x00(X\x07\x00\x00\x00entriesq\x01]X\t\x00\x00\x00pg_config", FormatFRPickle},
		{"other pickle", "\x80\x04\x95\x05\x00\x00\x00", FormatUnknown},
		{"kineto pretty", "\n{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n", FormatKineto},
		{"chrome array", `[{"name": "F_0,0", "ph": "X"}]`, FormatChromeTrace},
		{"empty", "", FormatUnknown},
		{"blank", " \n\t\n", FormatUnknown},
		{"text", "hello world\n", FormatUnknown},
		{"zip", "PK\x03\x04rest", FormatUnknown},
		{"gzip garbage", "\x1f\x8bxx", FormatUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sniff([]byte(tc.in)); got != tc.want {
				t.Errorf("Sniff(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
	t.Run("gzip csv", func(t *testing.T) {
		z := gzipBytes(t, []byte("rank,kind\n"))
		if got := Sniff(z); got != FormatCSV {
			t.Errorf("got %s, want csv", got)
		}
		if got := Sniff(z[:len(z)-4]); got != FormatCSV {
			t.Errorf("cut gzip: got %s, want csv", got)
		}
	})
}

// TestSniffSharedData recognises the public traces in ../shared/data, when
// present: Kineto, Megatron timeline, PiPPy's Chrome trace, Flight Recorder
// pickles.
func TestSniffSharedData(t *testing.T) {
	want := map[string]Format{
		"../../shared/data/megatron_timeline/timeline-ST.json.gz": FormatMegatron,
		"../../shared/data/pippy/pipe_visualized_4stage_4mb.json": FormatChromeTrace,
		"../../shared/data/megatron_timeline/ms-ST.json":          FormatUnknown, // pretty-printed JSON, not a trace
		"../../shared/data/megatron_timeline/meta-ST.yaml":        FormatUnknown,
	}
	files, _ := filepath.Glob("../../shared/data/kineto/*.json.gz")
	dlrm, _ := filepath.Glob("../../shared/data/kineto/dlrm_8rank/*.json.gz")
	for _, f := range append(files, dlrm...) {
		want[f] = FormatKineto
	}
	dumps, _ := filepath.Glob("../../shared/data/flight_recorder/*/_dump_*")
	for _, f := range dumps {
		want[f] = FormatFRPickle
	}
	if _, err := os.Stat("../../shared/data"); err != nil {
		t.Skip("../shared/data not present")
	}
	for f, want := range want {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > sniffLen {
			data = data[:sniffLen]
		}
		if got := Sniff(data); got != want {
			t.Errorf("%s: %s, want %s", f, got, want)
		}
	}
}

// bigWorldDump is a Flight Recorder dump as torch lays it out (version,
// pg_config, nccl_version, pg_status, entries) of rank 0 of a job of world
// ranks, whose default process group lists them all in pg_config, with
// one pending all-reduce of that group; as a pickle (protocol 2), or as
// JSON.
func bigWorldDump(world int, asJSON bool) []byte {
	var ranks strings.Builder
	ranks.WriteByte('[')
	for r := range world {
		if r > 0 {
			ranks.WriteString(", ")
		}
		ranks.WriteString(strconv.Itoa(r))
	}
	ranks.WriteByte(']')
	if asJSON {
		return fmt.Appendf(nil, `{"version": "2.9", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": %q}}, "nccl_version": "2.27.3", "pg_status": {}, "entries": [{"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"], "profiling_name": "nccl:all_reduce", "time_created_ns": 5000, "state": "scheduled", "is_p2p": false, "p2p_seq_id": 0, "collective_seq_id": 0}]}`, ranks.String())
	}
	str := func(b []byte, s string) []byte {
		b = append(b, 'X')
		b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
		return append(b, s...)
	}
	b := []byte{0x80, 2, '}', '('}
	b = str(b, "version")
	b = str(b, "2.9")
	b = str(b, "pg_config")
	b = append(b, '}', '(')
	b = str(b, "0")
	b = append(b, '}', '(')
	for _, kv := range [][2]string{{"name", "0"}, {"desc", "default_pg"}, {"ranks", ranks.String()}} {
		b = str(str(b, kv[0]), kv[1])
	}
	b = append(b, 'u', 'u')
	b = str(str(b, "nccl_version"), "2.27.3")
	b = append(str(b, "pg_status"), '}')
	b = append(str(b, "entries"), ']', '(', '}', '(')
	b = append(str(b, "record_id"), 'K', 0)
	b = append(str(b, "pg_id"), 'K', 0)
	b = append(str(str(str(b, "process_group"), "0"), "default_pg"), 0x86)
	b = append(str(b, "p2p_seq_id"), 'K', 0)
	b = append(str(b, "collective_seq_id"), 'K', 0)
	b = str(str(b, "profiling_name"), "nccl:all_reduce")
	b = append(str(b, "time_created_ns"), 'J', 0x88, 0x13, 0, 0) // 5000
	b = str(str(b, "state"), "scheduled")
	b = append(str(b, "is_p2p"), 0x89)
	return append(b, 'u', 'e', 'u', '.')
}

// TestSniffFlightRecorderBigWorld: the dumps of a job of 20000 ranks list
// them all in pg_config, before "entries", so the first 64 KiB hold no
// "entries": they are still Flight Recorder dumps, pickle and JSON alike,
// and they are read. (Sniffing wanted "entries" in the prefix, and a
// 16384-rank job's dumps were "no trace files".)
func TestSniffFlightRecorderBigWorld(t *testing.T) {
	dir := t.TempDir()
	for _, asJSON := range []bool{false, true} {
		data := bigWorldDump(20000, asJSON)
		if bytes.Contains(data[:sniffLen], []byte("entries")) {
			t.Fatal(`"entries" within the first 64 KiB: the test no longer tests it`)
		}
		want := FormatFRPickle
		if asJSON {
			want = FormatFRJSON
		}
		if got := Sniff(data[:sniffLen]); got != want {
			t.Errorf("json %v: Sniff = %s, want %s", asJSON, got, want)
		}
		path := filepath.Join(dir, fmt.Sprintf("json%v", asJSON), "_dump_0")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Open([]string{filepath.Dir(path)}, Options{})
		if err != nil {
			t.Fatalf("json %v: %v", asJSON, err)
		}
		tr := res.Trace
		if tr.Len() != 1 || tr.Completed(0) || tr.Kind[0] != trace.AllReduce || tr.Meta.WorldSize != 20000 {
			t.Fatalf("json %v: %d rows, world %d; want the pending all-reduce, world 20000", asJSON, tr.Len(), tr.Meta.WorldSize)
		}
	}
}
