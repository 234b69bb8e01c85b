// query.mjs DIR SQLFILE [STATEMENT...]: runs SQLFILE with DuckDB
// (@duckdb/node-api) on the Parquet export in DIR, after the statements
// given (e.g. SET VARIABLE ppprof_first_step = 1), and prints the rows as
// JSON (numbers as strings where they are 64-bit, so nothing is rounded).
// Used by duckdb_test.go.
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, sqlFile, ...before] = process.argv.slice(2);
const instance = await DuckDBInstance.create(':memory:');
const conn = await instance.connect();
await conn.run(`SET VARIABLE ppprof_dir = '${dir.replaceAll("'", "''")}'`);
for (const s of before) {
  await conn.run(s);
}
const reader = await conn.runAndReadAll(readFileSync(sqlFile, 'utf8'));
const rows = reader.getRowObjectsJson();
process.stdout.write(JSON.stringify(rows));
