// Package duckdbtest checks the SQL shipped in docs/sql against analyze, by
// running it with DuckDB on ppprof's Parquet export. Its test needs Node.js
// and the @duckdb/node-api package, so it is built only with the duckdb tag:
//
//	npm install --prefix DIR @duckdb/node-api
//	PPPROF_DUCKDB_DIR=DIR go test -tags duckdb ./internal/duckdbtest/
//
// (.ci/run does this.)
package duckdbtest
