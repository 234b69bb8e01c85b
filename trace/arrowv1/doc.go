// Package arrowv1 encodes ppprof traces as Arrow IPC (schema v1, file and
// stream formats) and decodes them, tolerating streams cut off part way.
//
// It is the only ppprof package that imports arrow-go: everything above it
// sees trace.Trace. The schema, one column per trace.Trace field in the
// order of trace.Columns, is described by Schema; the layout rules a reader
// relies on (nullable times, the kind dictionary, metadata keys) are on the
// functions that write and read it.
package arrowv1
