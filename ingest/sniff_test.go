package ingest

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
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
