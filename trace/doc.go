// Package trace is ppprof's event model: one row per operation one rank
// performed, stored column by column so analyses scan slices instead of
// building a struct per event.
//
// The package uses only the standard library. Codecs live elsewhere
// (trace/arrowv1 for Arrow, ingest for CSV and JSONL); analyses and reports
// see only this model.
package trace
