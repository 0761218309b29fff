#!/usr/bin/env bash
# Side by side on one GPU: transformers + torch, then govllm, on the same
# random-weight checkpoint of a real Qwen3.5 shape (bench/transformers_cuda.py
# makes it). Prefill of 2,048 tokens, decode at batch 1, 16 and 64.
#   bench/cuda.sh {0.8b|2b|moe} DIR [GOVLLM]
set -euo pipefail
shape=$1 dir=$2 govllm=${3:-govllm}
python3 "$(dirname "$0")/transformers_cuda.py" "$shape" "$dir"
"$govllm" bench -m "$dir" --device cuda -p 2048 -n 0 -r 3 -o json
"$govllm" bench -m "$dir" --device cuda -p 0 -n 128 -r 3 -o json
"$govllm" bench -m "$dir" --device cuda -p 16 -n 32 --concurrency 16 -r 2 -o json
"$govllm" bench -m "$dir" --device cuda -p 16 -n 16 --concurrency 64 -r 2 -o json
