#!/usr/bin/env bash
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Builds the libFuzzer targets of fuzz/ with clang, ASan and UBSan into
# build-fuzz/ and runs each (default: all) for SECONDS (default 30), starting
# from its seed corpus fuzz/corpus/TARGET. Inputs that reach new code are
# kept in build-fuzz/corpus/TARGET, not in the repository (copy the useful
# ones into fuzz/corpus/ by hand). A crash, a leak, undefined behaviour, an
# input taking over 10 s or 2 GiB stops that target with its reproducer in
# build-fuzz/artifacts/ and makes the script exit 1; rerun it with
# `build-fuzz/fuzz/TARGET build-fuzz/artifacts/FILE`.
#
# Targets run side by side, one a core (FUZZ_PARALLEL targets at once). The
# CPU kernels are built without coverage instrumentation or UBSan
# (models/CMakeLists.txt: no target runs them past a model's load).
#
# The test command runs every target for 30 s. A long run:
#   scripts/fuzz.sh 3600                 # an hour per target
#   FUZZ_WORKERS=2 scripts/fuzz.sh 600 tokenizer_encode_fuzz   # two processes
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-30}"
shift || true
WORKERS="${FUZZ_WORKERS:-1}"
t0=$SECONDS
CC=clang CXX=clang++ scripts/build.sh -B build-fuzz -D CMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -D CMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -D INFER_FUZZ=ON \
  -D INFER_SANITIZE=address,undefined -D INFER_ENABLE_CUDA=OFF -D INFER_BUILD_TESTS=OFF \
  -D INFER_BUILD_BENCHMARKS=OFF --target fuzzers
echo "fuzz: built in $((SECONDS - t0)) s"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi
mkdir -p build-fuzz/artifacts
parallel=()
# With -jobs, libFuzzer runs workers in subprocesses logging to fuzz-N.log.
if [ "$WORKERS" -gt 1 ]; then parallel=(-jobs="$WORKERS" -workers="$WORKERS"); fi
# The HTTP targets take inputs of up to 1 MiB (deep and wide JSON bodies,
# many pipelined requests) and start from a dictionary of their syntax.
target_flags() {
  case "$1" in
    openai_embeddings_fuzz | rest_infer_fuzz | tei_routes_fuzz) echo "-max_len=1048576 -dict=fuzz/json.dict" ;;
    http_request_fuzz) echo "-max_len=1048576 -dict=fuzz/http.dict" ;;
    tokenizer_json_fuzz) echo "-dict=fuzz/json.dict" ;;
  esac
}
# One target's run: its log in build-fuzz/TARGET.log, its exit code in
# build-fuzz/TARGET.rc.
run_target() {
  local t=$1 rc=0
  local -a flags
  mkdir -p "build-fuzz/corpus/$t"
  read -r -a flags <<<"$(target_flags "$t")"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${flags[@]}" "${parallel[@]}" \
    -artifact_prefix="build-fuzz/artifacts/$t-" "build-fuzz/corpus/$t" "fuzz/corpus/$t" \
    >"build-fuzz/$t.log" 2>&1 || rc=$?
  # With -jobs, the workers' logs (fuzz-N.log, in this folder) join the target's.
  for w in fuzz-*.log; do [ -e "$w" ] && cat "$w" >>"build-fuzz/$t.log" && rm -f "$w"; done
  echo "$rc" >"build-fuzz/$t.rc"
}
# Targets run side by side, one a core (FUZZ_PARALLEL, default every core),
# each for SECONDS_EACH: the same executions per target in a fraction of the
# time. With FUZZ_WORKERS > 1 one target at a time takes every worker.
AT_ONCE="${FUZZ_PARALLEL:-$(nproc)}"
if [ "$WORKERS" -gt 1 ]; then AT_ONCE=1; fi
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$AT_ONCE" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
wait || true
failed=0
total=0
printf '%-24s %12s %10s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
  out="build-fuzz/$t.log"
  rc=$(cat "build-fuzz/$t.rc" 2>/dev/null || echo 1)
  runs=$(awk '/stat::number_of_executed_units:/{s+=$2} END{print s+0}' "$out")
  rate=$(awk '/stat::average_exec_per_sec:/{s+=$2} END{print s+0}' "$out")
  total=$((total + runs))
  if [ "$rc" -eq 0 ]; then
    printf '%-24s %12d %10d  ok\n' "$t" "$runs" "$rate"
  else
    printf '%-24s %12d %10d  FAILED (exit %d): see %s\n' "$t" "$runs" "$rate" "$rc" "$out"
    grep -E "ERROR|runtime error|SUMMARY|Test unit written" "$out" | head -5 || true
    failed=1
  fi
done
echo "fuzz: $total executions in all"
exit "$failed"
