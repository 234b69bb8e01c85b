package main

import (
	"fmt"

	"github.com/ppprof/ppprof/ingest"
	"github.com/spf13/cobra"
)

// addMapFlag registers the repeatable --map KIND=REGEXP flag on cmd; each
// value is appended to *rules as given and parsed by openWithProgress.
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
