// Package report renders analysis results for people and machines: text,
// Markdown and JSON today; one result, many renderings, no analysis here.
package report

import (
	"fmt"
	"io"

	"github.com/ppprof/ppprof/analyze"
)

// Format is an output format of Write.
type Format string

// The formats Write knows.
const (
	Text     Format = "text"
	JSON     Format = "json"
	Markdown Format = "markdown"
)

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Text, JSON, Markdown:
		return f, nil
	}
	return "", fmt.Errorf("unknown format %q (want text, json or markdown)", s)
}

// Write renders rep to w in format f.
func Write(w io.Writer, rep *analyze.Report, f Format) error {
	switch f {
	case JSON:
		return writeJSON(w, rep)
	case Markdown:
		return writeText(w, rep, true)
	case Text, "":
		return writeText(w, rep, false)
	}
	return fmt.Errorf("unknown format %q", f)
}
