#!/usr/bin/env python3
"""Writes fr_expected.json: what each Flight Recorder dump in
../shared/data/flight_recorder holds, decoded with Python's own pickle, for
ingest/realdata tests to check the Go reader against.

Run from the repository root: python3 ingest/realdata/testdata/fr_expected.py
"""
import glob, json, os, pickle, re

root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "data", "flight_recorder")
out = {}
for path in sorted(glob.glob(os.path.join(root, "*", "_dump_*"))):
    case = os.path.basename(os.path.dirname(path))
    rank = int(path.rsplit("_", 1)[1])
    with open(path, "rb") as f:
        d = pickle.load(f)
    groups = {k: json.loads(v["ranks"]) for k, v in d["pg_config"].items()}
    entries = []
    for e in d["entries"]:
        name = e["profiling_name"]
        peer = -1
        m = re.search(r"(\d+)\s*(->|<-)\s*(\d+)", name)
        if m:
            peer = groups[e["process_group"][0]][int(m.group(3))]
        entries.append({
            "name": name, "group": e["process_group"][0], "p2p": e["is_p2p"],
            "seq": e["p2p_seq_id"] if e["is_p2p"] else e["collective_seq_id"],
            "state": e["state"], "created": e["time_created_ns"], "peer": peer,
        })
    out.setdefault(case, {})[str(rank)] = entries
with open(os.path.join(os.path.dirname(__file__), "fr_expected.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"), sort_keys=True)
    f.write("\n")
