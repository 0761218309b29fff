#!/usr/bin/env bash
# Side by side: govllm bench and llama.cpp's llama-bench (and, with
# --llama-batched-bench, llama-batched-bench for 8 parallel sequences) on the
# same GGUF files with the same thread count, in one run; prints a markdown
# table of tokens/s and the ratio govllm / llama.cpp, and peak RSS.
#
#   bench/vs-llamacpp.sh --llama-bench ~/llama.cpp/build/bin/llama-bench \
#       [--llama-batched-bench ~/llama.cpp/build/bin/llama-batched-bench] \
#       [-t 2] [-p 512] [-n 128] [-r 5] [--concurrency 8] MODEL.gguf...
#
# Build llama.cpp from source with native flags (cmake -DGGML_NATIVE=ON):
# the prebuilt libraries are far slower and prove nothing. Make benchmark
# models with: go run ./tools/synth -shape qwen3.5-0.8b -type q8_0 -o FILE
set -euo pipefail
cd "$(dirname "$0")/.."
LB= LBB= T=2 P=512 N=128 R=5 C=8 MODELS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-bench) LB=$2; shift 2 ;;
    --llama-batched-bench) LBB=$2; shift 2 ;;
    -t) T=$2; shift 2 ;;
    -p) P=$2; shift 2 ;;
    -n) N=$2; shift 2 ;;
    -r) R=$2; shift 2 ;;
    --concurrency) C=$2; shift 2 ;;
    -*) echo "unknown flag $1" >&2; exit 2 ;;
    *) MODELS+=("$1"); shift ;;
  esac
done
[ -n "$LB" ] && [ ${#MODELS[@]} -gt 0 ] || { echo "usage: $0 --llama-bench PATH [--llama-batched-bench PATH] [-t N] MODEL.gguf..." >&2; exit 2; }
OUT=$(mktemp -d)
go build -o "$OUT/govllm" ./cmd/govllm
peak() { /usr/bin/time -f %M -o "$1" "${@:2}"; }
# must runs a benchmark command with stderr kept, and stops the script with
# the command's last words if it fails (set -e alone would end it silently).
must() {
  local what=$1; shift
  "$@" 2> "$OUT/err" || { rc=$?; echo "$what failed on $M (exit $rc):" >&2; tail -5 "$OUT/err" >&2; exit 1; }
}
echo "date: $(date -u +%FT%TZ), cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, threads: $T, llama.cpp: $("$LB" --version 2>&1 | grep -m1 -o 'version: .*' || echo unknown)"
echo
echo "| model | test | threads | govllm t/s | llama.cpp t/s | govllm / llama.cpp |"
echo "|---|---|---|---|---|---|"
for M in "${MODELS[@]}"; do
  cat "$M" > /dev/null # both read the file from the page cache
  label=$(basename "$M" .gguf)
  must llama-bench peak "$OUT/rss-l" "$LB" -m "$M" -p "$P" -n "$N" -t "$T" -r "$R" -o json > "$OUT/l.json"
  must "govllm bench" peak "$OUT/rss-g" "$OUT/govllm" bench -m "$M" -p "$P" -n "$N" -t "$T" -r "$R" -o json > "$OUT/g.json"
  args=(-label "$label" -llama "$OUT/l.json" -govllm "$OUT/g.json" -rss-llama "$(tail -1 "$OUT/rss-l")" -rss-govllm "$(tail -1 "$OUT/rss-g")")
  if [ -n "$LBB" ]; then
    must llama-batched-bench "$LBB" -m "$M" -npp "$P" -ntg "$N" -npl "$C" -t "$T" -c $(( (P + N) * C + 64 )) --output-format jsonl > "$OUT/lb.jsonl"
    must "govllm bench --concurrency" "$OUT/govllm" bench -m "$M" -p "$P" -n "$N" -t "$T" -r 1 --concurrency "$C" -o json > "$OUT/gb.json"
    args+=(-llama-batched "$OUT/lb.jsonl" -govllm-batched "$OUT/gb.json")
  fi
  go run ./bench/compare "${args[@]}"
done
rm -rf "$OUT"
