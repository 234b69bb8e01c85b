package ingest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/trace"
)

// Seed corpora live in testdata/fuzz/<FuzzName>/; the f.Add seeds below are
// the fixtures and a few edge cases.

func addFixtureSeeds(f *testing.F, names ...string) {
	for _, n := range names {
		data, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// hasCR reports whether any string column holds '\r', which encoding/csv
// does not always read back as written ("\r\n" becomes "\n").
func hasCR(t *trace.Trace) bool {
	for i := 0; i < t.Len(); i++ {
		if strings.ContainsRune(t.Shape[i].String(), '\r') || strings.ContainsRune(t.Dtype[i].String(), '\r') {
			return true
		}
	}
	return false
}

// FuzzReadCSV: ReadCSV never panics, what it accepts passes Validate, and
// writing it back and reading it again gives the same trace.
func FuzzReadCSV(f *testing.F) {
	addFixtureSeeds(f, "gpipe2.csv", "hang2.csv")
	f.Add([]byte("rank,stage,step,kind,seq,start_ns,end_ns,shape\n0,0,0,F,0,,,\"a\nb\"\n"))
	f.Add([]byte("\ufeff rank , kind ,seq,stage,step,start_ns,end_ns\n 1 ,SEND_F,0,0,0, 5 ,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadCSV(bytes.NewReader(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted an invalid trace: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteCSV(&buf, tr); err != nil {
			t.Fatal(err)
		}
		again, err := ReadCSV(&buf)
		if err != nil {
			t.Fatalf("re-reading what WriteCSV wrote: %v\n%s", err, buf.String())
		}
		if d := trace.Diff(tr, again); d != "" && !hasCR(tr) {
			t.Fatalf("round trip: %s", d)
		}
	})
}

// FuzzReadJSONL: ReadJSONL never panics, what it accepts passes Validate,
// and it round-trips through WriteJSONL.
func FuzzReadJSONL(f *testing.F) {
	addFixtureSeeds(f, "gpipe2.jsonl")
	f.Add([]byte(`{"rank":0,"stage":0,"step":0,"kind":"F","seq":"9223372036854775807","start_ns":null,"issue_ns":-1}`))
	f.Add([]byte("\n\n{\"rank\":1,\"stage\":0,\"step\":0,\"kind\":\"RECV_B\",\"peer\":0,\"seq\":1,\"start_ns\":1,\"shape\":\"\\u00e9\\n\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadJSONL(bytes.NewReader(data))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted an invalid trace: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteJSONL(&buf, tr); err != nil {
			t.Fatal(err)
		}
		again, err := ReadJSONL(&buf)
		if err != nil {
			t.Fatalf("re-reading what WriteJSONL wrote: %v\n%s", err, buf.String())
		}
		if d := trace.Diff(tr, again); d != "" {
			t.Fatalf("round trip: %s", d)
		}
	})
}

// FuzzSniffAndRead feeds bytes through the path ReadFile takes (gzip,
// sniffing, every format's reader): it never panics, errors are
// *FileError values, and what it accepts passes Validate and is described
// by its FileInfo.
func FuzzSniffAndRead(f *testing.F) {
	addFixtureSeeds(f, "gpipe2.csv", "gpipe2.jsonl", "hang2.csv")
	f.Add([]byte(`{"schemaVersion": 1, "traceEvents": []}`))
	f.Add(gzipBytes(f, []byte("rank,stage,step,kind,seq,start_ns,end_ns\n0,0,0,F,0,0,1\n")))
	for _, seed := range arrowSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, info, warns, err := readBytes("input", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "input" {
				t.Fatalf("error %v (%T) is not a *FileError naming the input", err, err)
			}
			if strings.Contains(err.Error(), "decoder panicked") {
				t.Fatalf("the Arrow decoder panicked: %v", err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("accepted an invalid trace: %v", err)
		}
		if info.Events != tr.Len() || len(info.Ranks) != len(tr.Ranks()) {
			t.Fatalf("FileInfo %+v does not describe the %d-event trace", info, tr.Len())
		}
		for _, w := range warns {
			if w.Path != "input" || w.Message == "" {
				t.Fatalf("warning %+v", w)
			}
		}
	})
}
