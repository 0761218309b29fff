#!/usr/bin/env bash
# Two govllm builds alternating on one GPU, as docs/cuda.md's before/after
# tables are measured: tools/synth GGUFs of the 0.8B and 2B shapes, decode at
# batch 1 (bf16 and Q4_K_M), 16 and 64 (greedy on the device) and a 2,048-token
# prefill, each test A then B, ROUNDS times. Prints test, binary, model and
# tokens/s (mean ± spread of govllm bench's repetitions), a line each.
#   bench/cuda-ab.sh A B [SYNTH] [DIR] [ROUNDS]
# A and B are govllm binaries, SYNTH a tools/synth binary (go build
# ./tools/synth), DIR where the model files are made and kept.
set -euo pipefail
a=$1 b=$2 synth=${3:-synth} dir=${4:-/tmp/govllm-models} rounds=${5:-2}
mkdir -p "$dir"
for m in 0.8b:bf16 2b:bf16 0.8b:q4_k_m; do
  f="$dir/${m/:/-}.gguf"
  [ -f "$f" ] || "$synth" -shape "qwen3.5-${m%%:*}" -type "${m#*:}" -o "$f" >/dev/null
done
run() { # test, model, bench flags
  for bin in "$a" "$b"; do
    printf '%s\t%s\t%s\t' "$1" "$bin" "$2"
    timeout 120 "$bin" bench --device cuda -m "$dir/$2.gguf" "${@:3}" 2>/dev/null |
      awk -F'|' '/^\| qwen/ {gsub(/ /, "", $8); printf "%s ", $8}' || printf 'failed'
    echo
  done
}
for ((r = 1; r <= rounds; r++)); do
  for m in 0.8b-bf16 2b-bf16 0.8b-q4_k_m; do run "batch 1" $m --greedy -p 0 -n 128 -r 3; done
  run "batch 16" 0.8b-bf16 --greedy -p 16 -n 64 -r 2 --concurrency 16
  run "batch 64" 0.8b-bf16 --greedy -p 16 -n 64 -r 2 --concurrency 64
  run "prefill 2048" 0.8b-bf16 -p 2048 -n 0 -r 3
done
