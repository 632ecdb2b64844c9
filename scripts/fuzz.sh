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
# The test command runs every target for 30 s. A long run:
#   scripts/fuzz.sh 3600                 # an hour per target
#   FUZZ_WORKERS=2 scripts/fuzz.sh 600 tokenizer_encode_fuzz   # two processes
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${1:-30}"
shift || true
WORKERS="${FUZZ_WORKERS:-1}"
CC=clang CXX=clang++ scripts/build.sh -B build-fuzz -D CMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -D CMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -D INFER_FUZZ=ON \
  -D INFER_SANITIZE=address,undefined -D INFER_ENABLE_CUDA=OFF -D INFER_BUILD_TESTS=OFF \
  --target fuzzers
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
failed=0
total=0
printf '%-24s %12s %10s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  out="build-fuzz/$t.log"
  rc=0
  read -r -a flags <<<"$(target_flags "$t")"
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build-fuzz/fuzz/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${flags[@]}" "${parallel[@]}" \
    -artifact_prefix="build-fuzz/artifacts/$t-" "build-fuzz/corpus/$t" "fuzz/corpus/$t" \
    >"$out" 2>&1 || rc=$?
  logs=("$out")
  for w in fuzz-*.log; do [ -e "$w" ] && logs+=("$w"); done
  runs=$(awk '/stat::number_of_executed_units:/{s+=$2} END{print s+0}' "${logs[@]}")
  rate=$(awk '/stat::average_exec_per_sec:/{s+=$2} END{print s+0}' "${logs[@]}")
  if [ ${#logs[@]} -gt 1 ]; then cat "${logs[@]:1}" >>"$out" && rm -f "${logs[@]:1}"; fi
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
