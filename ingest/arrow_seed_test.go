//go:build !ppprof_arrow

package ingest

import "testing"

func arrowSeeds(f *testing.F) [][]byte { return nil }
