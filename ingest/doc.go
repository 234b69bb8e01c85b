// Package ingest opens trace files, directories and globs, recognises each
// file's format by its content, reads it into a trace.Trace and merges many
// ranks' files into one validated trace.
//
// Formats: Arrow file and Arrow stream (schema v1, via trace/arrowv1), CSV
// (one header row) and JSONL (one object per line) with the event model's
// column names; and other tools' traces: Kineto (torch.profiler) JSON,
// Megatron-style timer timelines, plain Chrome traces (PiPPy), PyTorch
// Flight Recorder dumps (pickle or JSON); each optionally gzip-compressed.
// Chrome traces are decoded as a stream. How each maps to the model, what
// is inferred and how clocks are aligned across files: docs/formats.md.
//
// Reading tolerates what a crashed or hung job leaves behind: an Arrow stream
// cut off mid-batch yields its complete batches and a Warning saying how much
// was lost, and a stream the writer never closed yields all its batches and a
// Warning. Everything else that is wrong is an error naming the file and the
// reason; bad input never panics.
//
// CSV and JSONL carry no metadata. Their traces get Meta.Schema = 1 and
// nothing else: world size, stage count and the like are left unknown (zero)
// rather than inferred from the rows, because a file may hold only some of a
// job's ranks (one file per rank, or a hung job whose ranks did not all write)
// and an inferred world size would hide the ranks that are missing.
package ingest
