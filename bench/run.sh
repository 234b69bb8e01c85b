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
# the same bytes beside decode, ingest, analysis (1 core and all), end to end
# (analyze and whatif), hang, memory, disk, 256 vs 4096 ranks; then the
# Kineto JSON reader and the collector's hot path (their go test
# benchmarks). Every figure is a median.
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
# The floor under any decoder of these LZ4 files: decompressing their
# buffers alone, into a reused scratch buffer, nothing kept (1 core).
d=$(PPPROF_BENCH_DIR="$BENCH_DIR" go test -run XXX -bench 'DecompressOnly' -cpu 1 -benchtime 1x -count "$RUNS" ./trace/arrowv1/ 2>/dev/null | grep '^BenchmarkDecompressOnly' || true)
for sub in all times decode; do
  eps=$(echo "$d" | awk -v b="BenchmarkDecompressOnly/$sub" '$1 == b {for(i=1;i<=NF;i++) if($(i+1)=="events/s") print $i}' | median)
  [ -n "$eps" ] || continue
  rate=$(awk -v x="$eps" 'BEGIN{printf "%.1fM events/s", x/1e6}')
  if [ "$sub" = decode ]; then
    printf '| %-44s | %-30s | %s |\n' "the decoder on the same files, 1 core" "$rate" \
      "arrowv1.Read into recycled columns, in the same run as the two rows above; go test -bench DecompressOnly/decode -cpu 1 ./trace/arrowv1/"
    continue
  fi
  what="every buffer"
  [ "$sub" = times ] && what="issue, start, end columns only"
  printf '| %-44s | %-30s | %s |\n' "LZ4 decompression alone ($what), 1 core" \
    "$rate" "into one reused buffer, nothing kept: the most any decoder of these files can do; go test -bench DecompressOnly -cpu 1 ./trace/arrowv1/"
done
# The same job uncompressed (2 steps, ~800 MB: files a decoder could map and
# use where they lie): reading every byte of every buffer once (summed, 1
# core) is the floor under any decoder of them, memory bandwidth; then the
# decoder on them, in the same runs.
NONE_DIR=${NONE_DIR:-${TMPDIR:-/tmp}/ppprof-bench-fleet-none-2}
if [ ! -e "$NONE_DIR/.complete" ]; then
  rm -rf "$NONE_DIR" && mkdir -p "$NONE_DIR"
  echo "writing the fleet trace uncompressed (2 steps) to $NONE_DIR ..." >&2
  "$bin/ppprof" simulate --fleet --quiet --schedule interleaved --stages 16 --tp 8 --dp 32 \
    --microbatches 64 --steps 2 --jitter 0.05 --p2p-latency-us 10 --p2p-gbps 400 \
    --opt-ms 2 --compression none --seed 1 -o "$NONE_DIR"
  touch "$NONE_DIR/.complete"
fi
cat "$NONE_DIR"/rank-*.arrows > /dev/null
u=$(PPPROF_BENCH_DIR="$NONE_DIR" go test -run XXX -bench 'DecompressOnly/(read|decode)$' -cpu 1 -benchtime 3x -count "$RUNS" ./trace/arrowv1/ 2>/dev/null | grep '^BenchmarkDecompressOnly' || true)
read_eps=$(echo "$u" | awk '$1 == "BenchmarkDecompressOnly/read" {for(i=1;i<=NF;i++) if($(i+1)=="events/s") print $i}' | median)
dec_eps=$(echo "$u" | awk '$1 == "BenchmarkDecompressOnly/decode" {for(i=1;i<=NF;i++) if($(i+1)=="events/s") print $i}' | median)
if [ -n "$read_eps" ] && [ -n "$dec_eps" ]; then
  printf '| %-44s | %-30s | %s |\n' "uncompressed files: every byte read once, 1 core" \
    "$(awk -v x="$read_eps" 'BEGIN{printf "%.1fM events/s", x/1e6}')" \
    "the same job, 2 steps, --compression none (132 B/event): the most any decoder reading its columns can do here (memory bandwidth); go test -bench 'DecompressOnly/read' -cpu 1 ./trace/arrowv1/"
  printf '| %-44s | %-30s | %s |\n' "the decoder on the uncompressed files, 1 core" \
    "$(awk -v x="$dec_eps" 'BEGIN{printf "%.1fM events/s", x/1e6}')" \
    "$(awk -v x="$dec_eps" -v y="$read_eps" 'BEGIN{printf "arrowv1.Read into recycled columns, in the same runs: %.2fx the read", x/y}')"
fi
# How small LZ4 can make the same files: every buffer re-encoded at LZ4's
# highest level (HC), per rank file and as one stream of 64 ranks.
z=$(PPPROF_BENCH_DIR="$BENCH_DIR" go test -run XXX -bench 'LZ4Levels' -benchtime 1x ./trace/arrowv1/ 2>/dev/null | grep '^BenchmarkLZ4Levels' || true)
for sub in rank-files one-stream; do
  line=$(echo "$z" | awk -v b="BenchmarkLZ4Levels/$sub" '$1 ~ "^"b"(-[0-9]+)?$"')
  [ -n "$line" ] || continue
  get() { echo "$line" | awk -v u="$1" '{for(i=1;i<=NF;i++) if($(i+1)==u) printf "%.1f", $i}'; }
  what="per-rank files as written"
  [ "$sub" = one-stream ] && what="64 ranks in one stream, 64K-row batches"
  printf '| %-44s | %-30s | %s |\n' "on disk, LZ4 at its highest level (HC 9): $what" \
    "$(get lz4hc-B/event) B/event" \
    "default level $(get lz4-B/event); of the HC bytes: seq $(get hc-seq-B/event), times $(get hc-times-B/event), string offsets $(get hc-str-offsets-B/event); compresses at $(get lz4hc-MB/s) MB/s against $(get lz4-MB/s); go test -bench LZ4Levels ./trace/arrowv1/"
done
m=$(go test -run XXX -bench 'Match(Columns)?4096$' -cpu 1 -count "$RUNS" ./analyze/hang/ 2>/dev/null | grep '^BenchmarkMatch' || true)
if [ -n "$m" ]; then
  ops=$(echo "$m" | awk '$1 == "BenchmarkMatch4096" {for(i=1;i<=NF;i++) if($(i+1)=="p2p-ops/cpu-s") print $i}' | median)
  floor=$(echo "$m" | awk '$1 == "BenchmarkMatchColumns4096" {for(i=1;i<=NF;i++) if($(i+1)=="p2p-ops/cpu-s") print $i}' | median)
  printf '| %-44s | %-30s | %s |\n' "hang matching alone (BenchmarkMatch4096), 1 core" \
    "$(awk -v x="$ops" 'BEGIN{printf "%.1fM P2P ops per CPU-second", x/1e6}')" "go test -bench Match4096 -cpu 1 ./analyze/hang/"
  [ -n "$floor" ] && printf '| %-44s | %-30s | %s |\n' "... its columns read once (BenchmarkMatchColumns4096), 1 core" \
    "$(awk -v x="$floor" 'BEGIN{printf "%.1fM P2P ops per CPU-second", x/1e6}')" \
    "$(awk -v x="$floor" -v y="$ops" 'BEGIN{printf "the labels, kinds and peers of every row summed, in the same runs: matching takes %.1fx that time", x/y}')"
fi
# Flight Recorder dumps: one rank's dump decoded three ways and read
# whole, then `ppprof
# hang` (read whole) on every rank's dump of a hung 4096-rank job (8.2M
# entries, 1.3 GB of pickles, written by the benchmark: about a minute).
f=$(go test -run XXX -bench 'FRPickle' -cpu 1 -count "$RUNS" ./ingest/ 2>/dev/null | grep '^BenchmarkFRPickle' || true)
if [ -n "$f" ]; then
  for sub in fr read plain generic; do
    eps=$(echo "$f" | awk -v b="BenchmarkFRPickle/$sub" '$1 == b {for(i=1;i<=NF;i++) if($(i+1)=="entries/s") print $i}' | median)
    [ -n "$eps" ] || continue
    case $sub in
      fr) what="entries decoded into the fields read (as ppprof reads dumps)";;
      read) what="the whole reader of the dump: decoded, then the trace's rows";;
      plain) what="plain data, no gopickle (loadPickle)";;
      generic) what="gopickle, then plain data (the generic path)";;
    esac
    printf '| %-44s | %-30s | %s |\n' "Flight Recorder pickle, one dump of 2000 entries, 1 core: $sub" \
      "$(awk -v x="$eps" 'BEGIN{printf "%.2fM entries/s", x/1e6}')" "$what; go test -bench FRPickle -cpu 1 ./ingest/"
  done
fi
h=$(go test -run XXX -bench 'HangFlightRecorder$' -benchtime 1x ./cmd/ppprof/ 2>/dev/null | grep '^BenchmarkHangFlightRecorder' || true)
if [ -n "$h" ]; then
  sec=$(echo "$h" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="ns/op") printf "%.1f", $i/1e9}')
  eps=$(echo "$h" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="entries/s") printf "%.2fM", $i/1e6}')
  mbs=$(echo "$h" | awk '{for(i=1;i<=NF;i++) if($(i+1)=="MB/s") printf "%.1f", $i}')
  printf '| %-44s | %-30s | %s |\n' "ppprof hang, 4096 ranks' Flight Recorder dumps, 2 cores" \
    "$sec s ($eps entries/s)" "8.2M entries, 1.3 GB of pickles ($mbs MB/s), read whole, one run; go test -bench HangFlightRecorder -benchtime 1x ./cmd/ppprof/"
fi

# A trace of BIG_STEPS steps (98: 302M events, 9.1 GB, about 7 minutes to
# write), analysed end to end once: set BIG_STEPS to run it.
if [ -n "${BIG_STEPS:-}" ]; then
  BIG_DIR=${BIG_DIR:-${TMPDIR:-/tmp}/ppprof-bench-fleet-$BIG_STEPS}
  if [ ! -e "$BIG_DIR/.complete" ]; then
    rm -rf "$BIG_DIR" && mkdir -p "$BIG_DIR"
    echo "writing the fleet trace ($BIG_STEPS steps) to $BIG_DIR ..." >&2
    "$bin/ppprof" simulate --fleet --quiet --schedule interleaved --stages 16 --tp 8 --dp 32 \
      --microbatches 64 --steps "$BIG_STEPS" --jitter 0.05 --p2p-latency-us 10 --p2p-gbps 400 \
      --opt-ms 2 --compression lz4 --seed 1 -o "$BIG_DIR"
    touch "$BIG_DIR/.complete"
  fi
  cat "$BIG_DIR"/rank-*.arrows > /dev/null
  out=$( { /usr/bin/time -f '%e %U %S %M' "$bin/ppprof" analyze --format json -q "$BIG_DIR" > /dev/null; } 2>&1 | tail -1)
  read -r wall user sys rss <<< "$out"
  printf '| %-44s | %-30s | %s |\n' "ppprof analyze, $BIG_STEPS steps (--stream auto)" \
    "$(awk -v w="$wall" 'BEGIN{printf "%d:%04.1f", w/60, w-60*int(w/60)}')" \
    "one run; CPU $user + $sys s; peak RSS $(awk -v k="$rss" 'BEGIN{printf "%.1f GB", k*1024/1e9}')"
  # And its what-if of every step (a few whole steps at a time; about 3
  # minutes more): set BIG_WHATIF too.
  if [ -n "${BIG_WHATIF:-}" ]; then
    out=$( { /usr/bin/time -f '%e %U %S %M' "$bin/ppprof" whatif --format json -q "$BIG_DIR" > /dev/null; } 2>&1 | tail -1)
    read -r wall user sys rss <<< "$out"
    printf '| %-44s | %-30s | %s |\n' "ppprof whatif, $BIG_STEPS steps (--stream auto)" \
      "$(awk -v w="$wall" 'BEGIN{printf "%d:%04.1f", w/60, w-60*int(w/60)}')" \
      "one run; CPU $user + $sys s; peak RSS $(awk -v k="$rss" 'BEGIN{printf "%.1f GB", k*1024/1e9}')"
  fi
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
