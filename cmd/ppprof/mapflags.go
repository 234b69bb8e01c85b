package main

import (
	"fmt"
	"io"

	"github.com/ppprof/ppprof/ingest"
	"github.com/spf13/cobra"
)

// addMapFlag registers the repeatable --map KIND=REGEXP flag on cmd; each
// value is appended to *rules as given and parsed by openTracesMapped.
func addMapFlag(cmd *cobra.Command, rules *[]string) {
	cmd.Flags().StringArrayVar(rules, "map", nil,
		"map profiler annotation names to events, KIND=REGEXP with named groups stage, mb, chunk, step, "+
			`e.g. 'F=^fwd_s(?P<stage>\d+)_mb(?P<mb>\d+)$' (repeatable; tried before the built-in PP:0F3 / Forward i profiles)`)
}

// parseMapRules parses --map values.
func parseMapRules(values []string) ([]ingest.Rule, error) {
	var out []ingest.Rule
	for _, v := range values {
		r, err := ingest.ParseRule(v)
		if err != nil {
			return nil, fmt.Errorf("--map: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// openTracesMapped is openTraces with --map rules applied to profiler
// traces.
func openTracesMapped(paths, rules []string, quiet bool, stderr io.Writer) (*ingest.Result, error) {
	parsed, err := parseMapRules(rules)
	if err != nil {
		return nil, err
	}
	opt := ingest.Options{Rules: parsed}
	if !quiet {
		l := newWarnLimiter(stderr, nil)
		opt.Warn = l.warn
		defer l.flush()
	}
	return ingest.Open(paths, opt)
}
