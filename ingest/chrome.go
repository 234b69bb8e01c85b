package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// chromeEvent is one element of a Chrome trace's event array, as the
// streaming decoder hands it over. Numbers stay text so that timestamps
// past 2^53 and ids past int64 (a Kineto "Comms Id") decode exactly or not
// at all, never wrongly. The decoder reuses one chromeEvent: a visitor that
// keeps anything must copy it.
type chromeEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   json.RawMessage `json:"ts"`
	Dur  json.RawMessage `json:"dur"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// reset clears e for the next event, keeping the buffers.
func (e *chromeEvent) reset() {
	e.Name, e.Cat, e.Ph = "", "", ""
	e.Ts, e.Dur, e.Pid, e.Tid, e.Args = e.Ts[:0], e.Dur[:0], e.Pid[:0], e.Tid[:0], e.Args[:0]
}

// chromeHeader is what a Chrome trace says besides its events: the
// top-level keys of the object form that ppprof uses.
type chromeHeader struct {
	array           bool            // the bare-array form
	distributedInfo json.RawMessage // Kineto: rank, world_size, pg_config
	baseTimeNs      json.RawMessage // Kineto: baseTimeNanoseconds
	deviceName      string          // Kineto: deviceProperties[0].name
	kineto          bool            // a key only Kineto writes was seen
	events          int             // events decoded
	truncated       bool            // the data ended inside the event array
	lost            string          // why decoding stopped early, when truncated
}

// decodeChrome streams a Chrome trace (the {"traceEvents": [...]} object or
// the bare array) from r, calling visit for every event in order. It never
// holds more than one event: memory stays flat whatever the file size. Data
// that ends inside the event array (a profiler killed while writing) keeps
// the events before the cut and sets header.truncated; other malformed
// JSON is an error naming the event index.
func decodeChrome(r io.Reader, visit func(*chromeEvent) error) (chromeHeader, error) {
	var h chromeHeader
	dec := json.NewDecoder(r)
	tok, err := dec.Token()
	if err != nil {
		return h, fmt.Errorf("not a Chrome trace: %v", jsonErrText(err))
	}
	switch tok {
	case json.Delim('['):
		h.array = true
		return h, decodeEvents(dec, &h, visit)
	case json.Delim('{'):
	default:
		return h, errors.New("not a Chrome trace: want a JSON object or array")
	}
	return h, objectLoop(dec, &h, false, visit)
}

// objectLoop reads the keys of a Chrome trace's top-level object after its
// '{' (sawEvents: "traceEvents" was already read, by the fast Kineto path,
// which hands the rest of an object to it) up to its end.
func objectLoop(dec *json.Decoder, h *chromeHeader, sawEvents bool, visit func(*chromeEvent) error) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return cutOrErr(h, err, "reading a top-level key")
		}
		key, _ := tok.(string)
		switch key {
		case "traceEvents":
			tok, err := dec.Token()
			if err != nil {
				return cutOrErr(h, err, "reading traceEvents")
			}
			if tok != json.Delim('[') {
				return errors.New(`"traceEvents" is not an array`)
			}
			sawEvents = true
			if err := decodeEvents(dec, h, visit); err != nil || h.truncated {
				return err
			}
			continue
		case "distributedInfo":
			h.kineto = true
			err = dec.Decode(&h.distributedInfo)
		case "baseTimeNanoseconds":
			h.kineto = true
			err = dec.Decode(&h.baseTimeNs)
		case "deviceProperties":
			h.kineto = true
			var props []struct {
				Name string `json:"name"`
			}
			if err = dec.Decode(&props); err == nil && len(props) > 0 {
				h.deviceName = props[0].Name
			}
		default:
			if kinetoKeys[key] {
				h.kineto = true
			}
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return cutOrErr(h, err, fmt.Sprintf("reading %q", key))
		}
	}
	if !sawEvents {
		return errors.New(`a JSON object without "traceEvents": not a Chrome trace`)
	}
	return nil
}

// decodeEvents decodes the elements of an event array whose '[' dec has
// just read.
func decodeEvents(dec *json.Decoder, h *chromeHeader, visit func(*chromeEvent) error) error {
	var ev chromeEvent
	for dec.More() {
		ev.reset()
		if err := dec.Decode(&ev); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return fmt.Errorf("event %d: field %q: want %s, got %s", h.events, te.Field, te.Type, te.Value)
			}
			return cutOrErr(h, err, fmt.Sprintf("event %d", h.events))
		}
		if err := visit(&ev); err != nil {
			return fmt.Errorf("event %d (%q): %w", h.events, ev.Name, err)
		}
		h.events++
	}
	if _, err := dec.Token(); err != nil {
		return cutOrErr(h, err, "closing the event array")
	}
	return nil
}

// cutOrErr turns an unexpected end of data into truncation (keep what was
// read) and anything else into an error.
func cutOrErr(h *chromeHeader, err error, where string) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		h.truncated = true
		h.lost = where
		return nil
	}
	return fmt.Errorf("%s: %s", where, jsonErrText(err))
}

// parseMicros converts a Chrome-trace time in microseconds (an integer or
// a decimal such as 4458676524648.797) to nanoseconds, exactly for up to
// three decimals, by reading the digits rather than going through float64
// (whose 53 bits cannot hold today's epoch in nanoseconds). ok is false for
// a missing, non-numeric or out-of-range value.
func parseMicros(raw []byte) (ns int64, ok bool) {
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if s == "" || s == "null" {
		return 0, false
	}
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.Abs(f*1e3) > 9e18 {
			return 0, false
		}
		return int64(math.Round(f * 1e3)), true
	}
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" {
		whole = "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/1000-1 {
		return 0, false
	}
	var f int64
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		switch {
		case i < 3:
			f = f*10 + int64(c-'0')
		case i == 3 && c >= '5':
			f++ // round half up on the fourth decimal
		}
	}
	for i := len(frac); i < 3; i++ {
		f *= 10
	}
	ns = w*1000 + f
	if neg {
		ns = -ns
	}
	return ns, true
}

// rawInt reads a JSON integer (or a string holding one) as int64. ok is
// false for anything else, including integers past int64.
func rawInt(raw []byte) (int64, bool) {
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// rawKey turns a pid or tid (a number or a string) into a map key.
func rawKey(raw []byte) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) >= 2 && s[0] == '"' {
		var v string
		if json.Unmarshal(raw, &v) == nil {
			return v
		}
	}
	return s
}

// argMap decodes an event's args into raw values by key, numbers kept as
// text. A missing or malformed args object is an empty map.
func argMap(raw []byte) map[string]json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// argString returns args[key] as a string: a JSON string's value, or a
// number's text; "" when absent.
func argString(args map[string]json.RawMessage, key string) string {
	raw, ok := args[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "null" {
		return ""
	}
	return t
}

// argInt returns args[key] as an integer, or def when absent or not one.
func argInt(args map[string]json.RawMessage, key string, def int64) int64 {
	raw, ok := args[key]
	if !ok {
		return def
	}
	if v, ok := rawInt(raw); ok {
		return v
	}
	return def
}
