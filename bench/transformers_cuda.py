# Makes a random-weight Qwen3.5 checkpoint of a real shape (bf16 safetensors,
# Qwen3_5ForCausalLM) and times transformers + torch on the GPU with it:
# prefill of 2,048 tokens, greedy decode at batch 1, 16 and 64. The same
# directory is then benchmarked with `govllm bench --device cuda`
# (bench/cuda.sh), so both read one checkpoint in one run.
#   python3 bench/transformers_cuda.py {0.8b|2b|moe} OUTDIR
import json, sys, time
import torch
import transformers
from transformers import Qwen3_5TextConfig, Qwen3_5ForCausalLM, Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM

# hidden, intermediate: model/qwen35/synth.go; "moe" is its qwen3.5-moe-small
# (Qwen3.5-35B-A3B's layer design: 64 experts of 512, top 8, a shared expert).
SHAPES = {"0.8b": (1024, 3584), "2b": (2048, 6144), "moe": (1024, 3584)}
shape, out = sys.argv[1], sys.argv[2]
hidden, inter = SHAPES[shape]
layers = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)]
moe = shape == "moe"
Config, Model = (Qwen3_5MoeTextConfig, Qwen3_5MoeForCausalLM) if moe else (Qwen3_5TextConfig, Qwen3_5ForCausalLM)
extra = dict(num_experts=64, num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512) if moe else {}
cfg = Config(**extra, vocab_size=248320, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=24,
                        num_attention_heads=8, num_key_value_heads=2, head_dim=256, linear_num_key_heads=16,
                        linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
                        linear_conv_kernel_dim=4, layer_types=layers, rms_norm_eps=1e-6, tie_word_embeddings=True,
                        rope_parameters={"rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                                         "mrope_section": [11, 11, 10], "mrope_interleaved": True},
                        max_position_embeddings=262144, bos_token_id=None, eos_token_id=248044, pad_token_id=None)
torch.manual_seed(1)
with torch.device("cuda"):
    model = Model(cfg).to(torch.bfloat16).eval()
params = sum(p.numel() for p in model.parameters())
model.save_pretrained(out, safe_serialization=True)
res = {"transformers": transformers.__version__, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
       "shape": shape, "params": params}

# Device copy rate: what the batch-1 roofline is measured against.
buf = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
dst = torch.empty_like(buf)
for _ in range(3):
    dst.copy_(buf)
torch.cuda.synchronize()
t = time.perf_counter()
for _ in range(10):
    dst.copy_(buf)
torch.cuda.synchronize()
res["copy_TBps"] = 2 * 10 * buf.numel() / (time.perf_counter() - t) / 1e12
del buf, dst

def timed(f, reps=3):
    f()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        f()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best

g = torch.Generator(device="cuda").manual_seed(2)
ids = torch.randint(0, 248000, (1, 2048), device="cuda", generator=g)
with torch.no_grad():
    res["prefill_2048_tps"] = 2048 / timed(lambda: model(ids, use_cache=False, logits_to_keep=1))
    for batch, n in ((1, 32), (16, 32), (64, 16)):
        prompt = torch.randint(0, 248000, (batch, 16), device="cuda", generator=g)
        gen = lambda k: model.generate(prompt, max_new_tokens=k, min_new_tokens=k, do_sample=False,
                                       pad_token_id=0, eos_token_id=None)
        # Decode rate: the time of n+1 new tokens less that of 1 (the prefill).
        dt = timed(lambda: gen(n + 1), reps=2) - timed(lambda: gen(1), reps=2)
        res[f"decode_b{batch}_tps"] = batch * n / dt
print(json.dumps(res), flush=True)
