#!/usr/bin/env bash
# bench/run.sh: ppprof's performance table in one command (docs/performance.md).
#
#   bench/run.sh                 # 8 steps of the 4096-rank fleet job, 5 runs each
#   STEPS=16 RUNS=3 bench/run.sh # a larger trace, fewer runs
#
# It builds ppprof and internal/benchtable, writes the fleet trace once
# (ppprof simulate --fleet: PP 16 x TP 8 x DP 32 = 4096 ranks, interleaved
# v=2, 64 micro-batches, LZ4; about 3.08M events per step) into $BENCH_DIR,
# reads it into the page cache, and prints one table: the machine's limits on
# the same bytes beside decode, ingest, analysis (1 core and all), end to end,
# hang, memory, disk, 256 vs 4096 ranks; then the Kineto JSON reader and the
# collector's hot path (their go test benchmarks). Every figure is a median.
# Runs take a few minutes; nothing here asserts a time.
set -euo pipefail
cd "$(dirname "$0")/.."

STEPS=${STEPS:-8}
RUNS=${RUNS:-5}
KINETO_MB=${KINETO_MB:-256}
BENCH_DIR=${BENCH_DIR:-${TMPDIR:-/tmp}/ppprof-bench-fleet-$STEPS}
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT

go build -o "$bin/ppprof" ./cmd/ppprof
go build -o "$bin/benchtable" ./internal/benchtable

if [ ! -e "$BENCH_DIR/.complete" ]; then
  rm -rf "$BENCH_DIR" && mkdir -p "$BENCH_DIR"
  echo "writing the fleet trace ($STEPS steps) to $BENCH_DIR ..." >&2
  start=$(date +%s.%N)
  "$bin/ppprof" simulate --fleet --quiet --schedule interleaved --stages 16 --tp 8 --dp 32 \
    --microbatches 64 --steps "$STEPS" --jitter 0.05 --p2p-latency-us 10 --p2p-gbps 400 \
    --opt-ms 2 --compression lz4 --seed 1 -o "$BENCH_DIR"
  end=$(date +%s.%N)
  echo "$start $end" > "$BENCH_DIR/.complete"
fi
cat "$BENCH_DIR"/rank-*.arrows > /dev/null # into the page cache

"$bin/benchtable" -dir "$BENCH_DIR" -ppprof "$bin/ppprof" -runs "$RUNS" -footer=false

# The simulator's own rate, from the time the trace took to write.
read -r start end < "$BENCH_DIR/.complete"
printf '| %-44s | %-30s | %s |\n' "simulate --fleet (write the trace above)" \
  "$(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.1f s", e-s}')" "one run, when the trace was written; LZ4, per-rank streams"

# go test benchmarks, one row each (median of RUNS via -count).
median() { sort -g | awk '{a[NR]=$1} END{if(NR) print a[int((NR+1)/2)]}'; }

k=$(PPPROF_BENCH_MB=$KINETO_MB go test -run XXX -bench 'KinetoLarge$' -benchtime 1x -count "$RUNS" ./ingest/ 2>/dev/null | grep '^BenchmarkKinetoLarge' || true)
if [ -n "$k" ]; then
  mbs=$(echo "$k" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="MB/s") print $i}' | median)
  cpu=$(echo "$k" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="MB/cpu-s") print $i}' | median)
  peak=$(echo "$k" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="peak-heap-MB") print $i}' | median)
  printf '| %-44s | %-30s | %s |\n' "Kineto JSON (ingest, ${KINETO_MB} MB file), 1 file" "$mbs MB/s" "$cpu MB per CPU-second; peak heap $peak MB; go test -bench 'KinetoLarge\$' ./ingest/"
else
  printf '| %-44s | %-30s | %s |\n' "Kineto JSON" "n/a" "BenchmarkKinetoLarge not found in ./ingest/"
fi

c=$(go test -run XXX -bench 'BeginEnd$|IssueComplete' -count "$RUNS" ./collector/ 2>/dev/null | grep '^Benchmark' || true)
for b in BeginEnd IssueComplete; do
  ns=$(echo "$c" | awk -v b="Benchmark$b" '$1 ~ "^"b"(-[0-9]+)?$" {for(i=1;i<=NF;i++) if($(i+1)=="ns/op") print $i}' | median)
  [ -n "$ns" ] && printf '| %-44s | %-30s | %s |\n' "collector $b" "$ns ns/event" "go test -bench $b ./collector/"
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
