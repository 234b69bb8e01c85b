package arrowv1

import (
	"bytes"
	"encoding/binary"
)

// Format is the Arrow IPC format of some bytes.
type Format int

// The formats Sniff tells apart.
const (
	FormatUnknown Format = iota // not Arrow IPC, or too short to tell
	FormatFile                  // the file format: "ARROW1" magic, footer at the end
	FormatStream                // the stream format: a schema message first
)

// String returns "arrow-file", "arrow-stream" or "unknown".
func (f Format) String() string {
	switch f {
	case FormatFile:
		return "arrow-file"
	case FormatStream:
		return "arrow-stream"
	}
	return "unknown"
}

// magic starts (and ends) an Arrow IPC file; the stream that follows it
// starts at byte 8.
var magic = []byte("ARROW1")

const fileStreamStart = 8

// Sniff tells the format of an input from its first bytes. The file format
// starts with the "ARROW1" magic. A stream starts with the continuation
// marker 0xFFFFFFFF and a metadata length; when prefix holds the whole
// first message (a few KB) it must also verify as a schema message. A
// stream in the legacy framing (Arrow < 0.15, no marker) is recognised only
// from its whole first message. Sniff looks at content only, never at names.
func Sniff(prefix []byte) Format {
	if bytes.HasPrefix(prefix, magic) {
		return FormatFile
	}
	if len(prefix) < 8 {
		return FormatUnknown
	}
	w := binary.LittleEndian.Uint32(prefix)
	metaStart := 4
	if w == continuation {
		w = binary.LittleEndian.Uint32(prefix[4:])
		metaStart = 8
	}
	n := int64(int32(w))
	if n < 8 || n > maxMetaLen {
		return FormatUnknown
	}
	if int64(len(prefix)-metaStart) < n {
		if metaStart == 4 {
			return FormatUnknown // legacy framing: too weak a signal to trust
		}
		return FormatStream
	}
	info, err := verifyMessage(prefix[metaStart : int64(metaStart)+n])
	if err != nil || info.header != headerSchema {
		return FormatUnknown
	}
	return FormatStream
}
