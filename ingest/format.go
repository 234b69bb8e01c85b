package ingest

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Format names a trace file format, as recognised from content by Sniff.
type Format string

// The formats Sniff recognises.
const (
	FormatUnknown     Format = "unknown"                // none of the below
	FormatArrowFile   Format = "arrow-file"             // Arrow IPC file (random access, with footer)
	FormatArrowStream Format = "arrow-stream"           // Arrow IPC stream (what the collector writes)
	FormatCSV         Format = "csv"                    // header row naming event-model columns
	FormatJSONL       Format = "jsonl"                  // one JSON object per line
	FormatKineto      Format = "kineto"                 // torch.profiler (Kineto) Chrome-trace JSON, one file per rank
	FormatMegatron    Format = "megatron-timeline"      // Megatron-style timer timeline (forward-compute, ...), every rank in one file
	FormatChromeTrace Format = "chrome-trace"           // any other Chrome trace (PiPPy's pipe visualizer...), read with the --map rules
	FormatFRPickle    Format = "flight-recorder-pickle" // PyTorch Flight Recorder dump, pickle
	FormatFRJSON      Format = "flight-recorder-json"   // PyTorch Flight Recorder dump, JSON
)

// isChrome reports whether f is one of the Chrome-trace formats, which are
// read by streaming.
func (f Format) isChrome() bool {
	return f == FormatKineto || f == FormatMegatron || f == FormatChromeTrace
}

// gzipMagic starts every gzip member (RFC 1952).
var gzipMagic = []byte{0x1f, 0x8b}

// arrowContinuation starts every message of an Arrow IPC stream written
// since Arrow 0.15, the schema message at byte 0 included.
var arrowContinuation = []byte{0xff, 0xff, 0xff, 0xff}

// corruptArrow reports whether data that Sniff did not recognise starts like
// an Arrow stream: a damaged rank file rather than something else.
func corruptArrow(data []byte) bool { return bytes.HasPrefix(data, arrowContinuation) }

// utf8BOM is skipped at the start of text formats (spreadsheets write it).
var utf8BOM = []byte{0xef, 0xbb, 0xbf}

// sniffLen is how many bytes of a file (after decompression) Sniff needs to
// recognise every format; callers that read a prefix should read this much.
const sniffLen = 64 << 10

// kinetoKeys are top-level keys of a Kineto / Chrome trace JSON object that
// no ppprof JSONL record has.
var kinetoKeys = map[string]bool{
	"traceEvents": true, "schemaVersion": true, "deviceProperties": true,
	"distributedInfo": true, "displayTimeUnit": true, "traceName": true,
	"baseTimeNanoseconds": true, "record_shapes": true,
}

// Sniff recognises a trace format from the first bytes of a file (64 KiB is
// always enough; less usually is), never from its name. A gzip-compressed
// prefix is decompressed as far as it goes and the content inside is
// recognised. Rules, in order: Arrow magic (file or stream); a pickle whose
// dict holds "entries" and "pg_config", or "version" and "pg_config" (the
// process groups of a job of 10000 ranks or more fill the first 64 KiB
// before "entries" comes), is a Flight Recorder dump; a JSON object with
// "entries" beside "pg_config" or "version", or "version" and "pg_config",
// is a Flight Recorder dump in JSON; a JSON array, or an object with "traceEvents" or
// another Kineto key, is a Chrome trace: Megatron-style when its first
// events are Megatron timers (forward-compute...), Kineto when the object
// has a key only Kineto writes (schemaVersion, deviceProperties,
// distributedInfo...) or its events have Kineto categories (cpu_op,
// kernel, user_annotation), else a plain Chrome trace; any other '{' whose
// first line is a whole JSON value is JSONL; a first line that parses as a
// comma-separated header with at least "rank" and "kind" columns is CSV;
// anything else is FormatUnknown.
func Sniff(prefix []byte) Format {
	if bytes.HasPrefix(prefix, gzipMagic) {
		inner, _ := gunzipPrefix(prefix, sniffLen)
		if len(inner) == 0 || bytes.HasPrefix(inner, gzipMagic) {
			return FormatUnknown
		}
		return Sniff(inner)
	}
	if f := sniffArrow(prefix); f != FormatUnknown {
		return f
	}
	if frPickleMagic(prefix) {
		return FormatFRPickle
	}
	text := bytes.TrimPrefix(prefix, utf8BOM)
	trimmed := bytes.TrimLeft(text, " \t\r\n")
	if len(trimmed) == 0 {
		return FormatUnknown
	}
	switch trimmed[0] {
	case '[':
		return classifyChrome(scanJSON(trimmed))
	case '{':
		sc := scanJSON(trimmed)
		if frJSONKeys(sc.keys) {
			return FormatFRJSON
		}
		if sc.kineto || sc.keys["traceEvents"] {
			return classifyChrome(sc)
		}
		if firstLineIsObject(trimmed) {
			return FormatJSONL
		}
		return FormatUnknown
	}
	if looksLikeCSVHeader(text) {
		return FormatCSV
	}
	return FormatUnknown
}

// jsonScan is what the start of a JSON document shows: the top-level keys
// of an object, and the names and categories of the first events.
type jsonScan struct {
	keys   map[string]bool
	kineto bool // a key only Kineto writes
	names  []string
	cats   []string
}

// scanJSON reads as much of data (a prefix, maybe cut anywhere) as it can.
func scanJSON(data []byte) jsonScan {
	sc := jsonScan{keys: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return sc
	}
	events := func() {
		for dec.More() && len(sc.names) < 256 {
			var e struct {
				Name string `json:"name"`
				Cat  string `json:"cat"`
			}
			if dec.Decode(&e) != nil {
				return
			}
			sc.names = append(sc.names, e.Name)
			sc.cats = append(sc.cats, e.Cat)
		}
	}
	if tok == json.Delim('[') {
		events()
		return sc
	}
	if tok != json.Delim('{') {
		return sc
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return sc
		}
		key, ok := tok.(string)
		if !ok {
			return sc
		}
		sc.keys[key] = true
		if kinetoKeys[key] && key != "traceEvents" {
			sc.kineto = true
		}
		if key == "traceEvents" {
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return sc
			}
			events()
			return sc
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return sc
		}
	}
	return sc
}

// kinetoCats are event categories only Kineto writes.
var kinetoCats = map[string]bool{"cpu_op": true, "kernel": true, "user_annotation": true, "gpu_user_annotation": true,
	"cuda_runtime": true, "gpu_memcpy": true, "python_function": true, "cuda_driver": true}

// classifyChrome tells the Chrome-trace formats apart by their first events.
func classifyChrome(sc jsonScan) Format {
	for _, n := range sc.names {
		if megatronSniffNames[n] {
			return FormatMegatron
		}
	}
	if sc.kineto {
		return FormatKineto
	}
	for _, c := range sc.cats {
		if kinetoCats[c] {
			return FormatKineto
		}
	}
	return FormatChromeTrace
}

// firstLineIsObject reports whether the first line of data, which starts
// with '{', is one whole JSON value, as in JSONL (or is cut off by the end of
// the prefix before its newline). A JSON document pretty-printed over many
// lines is not JSONL.
func firstLineIsObject(data []byte) bool {
	i := bytes.IndexByte(data, '\n')
	if i < 0 {
		return true
	}
	return json.Valid(data[:i])
}

// looksLikeCSVHeader reports whether the first line of text parses as CSV
// with at least the rank and kind columns. A last field cut off by the end
// of a prefix does not count.
func looksLikeCSVHeader(text []byte) bool {
	line := text
	complete := false
	if i := bytes.IndexByte(text, '\n'); i >= 0 {
		line, complete = text[:i], true
	}
	r := csv.NewReader(bytes.NewReader(line))
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil {
		return false
	}
	if !complete && len(fields) > 0 {
		fields = fields[:len(fields)-1]
	}
	var rank, kind bool
	for _, f := range fields {
		switch strings.TrimSpace(f) {
		case "rank":
			rank = true
		case "kind":
			kind = true
		}
	}
	return rank && kind
}

// gunzipPrefix decompresses data, which may be only the start of a gzip
// file, returning at most limit bytes (limit < 0: no limit) and whether the
// compressed data ended early. Other decompression errors (bad header,
// corrupt data, checksum mismatch) are returned with what was decompressed
// before them.
func gunzipPrefix(data []byte, limit int64) (out []byte, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	var buf bytes.Buffer
	var r io.Reader = zr
	if limit >= 0 {
		r = io.LimitReader(zr, limit)
	}
	_, err = buf.ReadFrom(r)
	return buf.Bytes(), err
}

// describePrefix shows how data starts, for "not a trace" errors: at most
// 16 bytes, quoted.
func describePrefix(data []byte) string {
	const n = 16
	if len(data) > n {
		return fmt.Sprintf("%q...", data[:n])
	}
	return fmt.Sprintf("%q", data)
}
