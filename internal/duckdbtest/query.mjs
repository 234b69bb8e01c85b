// query.mjs DIR SQLFILE: runs SQLFILE with DuckDB (@duckdb/node-api) on the
// Parquet export in DIR and prints the rows as JSON (numbers as strings
// where they are 64-bit, so nothing is rounded). Used by duckdb_test.go.
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, sqlFile] = process.argv.slice(2);
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
await conn.run(`SET VARIABLE ppprof_dir = '${dir.replaceAll("'", "''")}'`);
const reader = await conn.runAndReadAll(readFileSync(sqlFile, 'utf8'));
const rows = reader.getRowObjectsJson();
process.stdout.write(JSON.stringify(rows));
