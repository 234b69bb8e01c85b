#!/usr/bin/env python3
"""Writes ingest/testdata/fr/proto{2,4}/_dump_0: a two-entry Flight Recorder
dump (a completed all-reduce and a pending send on the pipeline group),
pickled with protocols 2 and 4. Run from the repository root."""
import os, pickle

d = {"version": "2.9", "nccl_version": "2.27.3",
     "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}, "5": {"name": "5", "desc": "PIPELINE_MODEL_PARALLEL_GROUP", "ranks": "[0, 1]"}},
     "pg_status": {"5": {"last_enqueued_collective": 3, "last_started_collective": -1, "last_completed_collective": 2}},
     "entries": [
        {"record_id": 7, "pg_id": 1, "process_group": ("5", "PIPELINE_MODEL_PARALLEL_GROUP"), "collective_seq_id": 3, "p2p_seq_id": 0, "op_id": 3,
         "profiling_name": "nccl:all_reduce", "time_created_ns": 1758610505592849034, "input_sizes": [[4, 2]], "input_dtypes": ["BFloat16"],
         "output_sizes": [[4, 2]], "output_dtypes": ["BFloat16"], "state": "completed", "time_discovered_started_ns": 1758610505592849100,
         "time_discovered_completed_ns": 1758610505592859100, "retired": True, "timeout_ms": 600000, "is_p2p": False},
        {"record_id": 8, "pg_id": 1, "process_group": ("5", "PIPELINE_MODEL_PARALLEL_GROUP"), "collective_seq_id": 3, "p2p_seq_id": 4, "op_id": 4,
         "profiling_name": "nccl:send 0->1", "time_created_ns": 1758610505592949034, "input_sizes": [[4096, 1, 5120]], "input_dtypes": ["BFloat16"],
         "output_sizes": [[4096, 1, 5120]], "output_dtypes": ["BFloat16"], "state": "scheduled", "time_discovered_started_ns": None,
         "time_discovered_completed_ns": None, "retired": False, "timeout_ms": 600000, "is_p2p": True},
     ]}
for proto in (2, 4):
    out = os.path.join("ingest", "testdata", "fr", f"proto{proto}")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "_dump_0"), "wb") as f:
        f.write(pickle.dumps(d, protocol=proto))
