package ingest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// The readers of other tools' formats take files nobody on this project
// wrote: each is fuzzed. Seeds are small generated traces (kineto_test.go,
// testdata/fr) and the files under testdata/fuzz/<FuzzName>/.

// checkPart finishes a part as Open would and checks it: a trace that
// passes Validate, described by its FileInfo.
func checkPart(t *testing.T, p *part, err error) {
	t.Helper()
	if err != nil {
		return
	}
	tr, info, _, err := finishOne(p)
	if err != nil {
		var fe *FileError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v (%T) is not a *FileError", err, err)
		}
		t.Fatalf("the reader made an invalid trace: %v", err)
	}
	if info.Events != tr.Len() {
		t.Fatalf("FileInfo says %d events, trace has %d", info.Events, tr.Len())
	}
}

func megatronSeed() []byte {
	return []byte(`[{"name":"forward-compute","ph":"X","pid":0,"tid":0,"ts":1.5,"dur":10,"args":{"step":3,"model_chunk":0,"mb_id":0}},
{"name":"forward-send","ph":"X","pid":0,"tid":1,"ts":11.5,"dur":1,"args":{"step":3,"model_chunk":-1,"mb_id":-1}},
{"name":"forward-recv","ph":"X","pid":0,"tid":11,"ts":11,"dur":2,"args":{"step":3,"model_chunk":-1,"mb_id":-1}},
{"name":"forward-compute","ph":"X","pid":0,"tid":10,"ts":13,"dur":10,"args":{"step":3,"model_chunk":0,"mb_id":0}},
{"name":"optimizer","ph":"X","pid":0,"tid":0,"ts":30,"dur":1,"args":{"step":3,"model_chunk":-1,"mb_id":-1}},
{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"PP rank 0, TP rank 0, compute"}},
{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"PP rank 0, TP rank 0, pp-comm"}},
{"name":"thread_name","ph":"M","pid":0,"tid":10,"args":{"name":"PP rank 1, TP rank 0, compute"}},
{"name":"thread_name","ph":"M","pid":0,"tid":11,"args":{"name":"PP rank 1, TP rank 0, pp-comm"}},
{"name":"process_name","ph":"M","pid":0,"args":{"name":"DP rank [0]"}}]`)
}

// FuzzReadKineto: the Kineto / Chrome-trace reader never panics and what it
// accepts is valid.
func FuzzReadKineto(f *testing.F) {
	f.Add(ppRank(0, 0, true))
	f.Add(ppRank(1, 12.5, false))
	f.Add([]byte(`[{"name": "F_0,0", "ph": "X", "ts": 1649317709410899.2, "dur": 10, "pid": "0", "tid": "0"}, {"name": "B_1,0", "ph": "X", "ts": 2, "dur": 1, "pid": "0", "tid": "1"}]`))
	f.Add([]byte(`{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 200, "dur": 100, "args": {"Comms Id": 10159970886766084423}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, kineto := range []bool{true, false} {
			p, err := readKineto("input", bytes.NewReader(data), kinetoOpts{mapper: newMapper(nil), kineto: kineto})
			checkPart(t, p, err)
		}
	})
}

// FuzzReadMegatron: the Megatron timeline reader never panics and what it
// accepts is valid.
func FuzzReadMegatron(f *testing.F) {
	f.Add(megatronSeed())
	f.Add([]byte(`{"traceEvents": [{"name":"backward-send","ph":"X","pid":1,"tid":"x","ts":"5","dur":1,"args":{"step":-4,"mb_id":2}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := readMegatron("input", bytes.NewReader(data))
		checkPart(t, p, err)
	})
}

// FuzzReadFlightRecorder: the Flight Recorder reader (pickle and JSON)
// never panics, never runs or builds anything but plain data, and what it
// accepts is valid.
func FuzzReadFlightRecorder(f *testing.F) {
	for _, p := range []string{"testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version": "2.9", "pg_config": {"7": {"desc": "PIPELINE_MODEL_PARALLEL_GROUP", "ranks": [1, 3]}}, "entries": [{"record_id": 1, "process_group": ["7", ""], "profiling_name": "nccl:recv 1<-0", "time_created_ns": 5, "state": "started", "is_p2p": true, "input_sizes": [[2]], "input_dtypes": ["Float"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, js := range []bool{false, true} {
			p, err := readFlightRecorder("_dump_3", data, js, nil, nil)
			if err != nil && strings.Contains(err.Error(), "panic") {
				t.Fatalf("reader panicked: %v", err)
			}
			checkPart(t, p, err)
		}
	})
}

// TestFlightRecorderPickleProtocols reads the same small dump pickled with
// protocols 2 and 4 (memo, frames, short strings).
func TestFlightRecorderPickleProtocols(t *testing.T) {
	for _, p := range []string{"testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0"} {
		tr, info, _, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Format != FormatFRPickle || tr.Len() != 2 || tr.Kind[1].String() != "SEND_F" || tr.Peer[1] != 1 || tr.EndNs[0]-tr.StartNs[0] != 10000 {
			t.Errorf("%s: %s, rows %+v %+v", p, info.Format, tr.At(0), tr.At(1))
		}
	}
}
