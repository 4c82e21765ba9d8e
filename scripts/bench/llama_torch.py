#!/usr/bin/env python3
"""The PyTorch side of the Llama CPU benchmark (scripts/bench/llama-cpu): the Llama Singularity
trains (model.arch llama) written as a PyTorch user writes it today: nn.RMSNorm, rotary
embeddings (transformers' rotate_half), SwiGLU, grouped-query attention through
scaled_dot_product_attention(is_causal=True, enable_gqa=True), a tied head, AdamW(fused=True),
fp32, on random tokens. Prints one JSON line

    {"tokens_per_s": ..., "step_ms": ..., "first_step_s": ..., "threads": N}

medians over the timed steps (those after --warmup). Each step: forward, cross-entropy,
backward, clip_grad_norm_(1.0), AdamW (weight decay on the 2-D tensors).

    ~/.cache/singularity/torch-venv/bin/python scripts/bench/llama_torch.py [--compile]
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, heads, kv_heads, hidden, eps):
        super().__init__()
        self.heads, self.kv_heads, self.hs = heads, kv_heads, C // heads
        self.input_layernorm = nn.RMSNorm(C, eps=eps)
        self.q_proj = nn.Linear(C, heads * self.hs, bias=False)
        self.k_proj = nn.Linear(C, kv_heads * self.hs, bias=False)
        self.v_proj = nn.Linear(C, kv_heads * self.hs, bias=False)
        self.o_proj = nn.Linear(heads * self.hs, C, bias=False)
        self.post_attention_layernorm = nn.RMSNorm(C, eps=eps)
        self.gate_proj = nn.Linear(C, hidden, bias=False)
        self.up_proj = nn.Linear(C, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, C, bias=False)

    @staticmethod
    def rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(B, T, self.heads, self.hs).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.kv_heads, self.hs).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv_heads, self.hs).transpose(1, 2)
        q, k = self.rotate(q, cos, sin), self.rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, C))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, layers, C, heads, kv_heads, hidden, context, vocab, theta=10000.0, eps=1e-5):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, C)
        self.layers = nn.ModuleList(Block(C, heads, kv_heads, hidden, eps) for _ in range(layers))
        self.norm = nn.RMSNorm(C, eps=eps)
        self.lm_head = nn.Linear(C, vocab, bias=False)
        self.lm_head.weight = self.embed_tokens.weight  # tied
        hs = C // heads
        inv = 1.0 / theta ** (torch.arange(0, hs, 2).float() / hs)
        freqs = torch.outer(torch.arange(context).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.embed_tokens(idx)
        cos, sin = self.cos[:T], self.sin[:T]
        for block in self.layers:
            x = block(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = Llama(args.layers, args.width, args.heads, args.kv_heads, args.hidden, args.context,
                  args.vocab)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": plain, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), fused=True)
    step_fn = torch.compile(model) if args.compile else model
    tokens = torch.randint(0, args.vocab, (args.batch, args.context + 1))
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    times = []
    first = None
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = step_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        if first is None:
            first = dt
        if i >= args.warmup:
            times.append(dt)
    step = statistics.median(times)
    print(json.dumps({"tokens_per_s": args.batch * args.context / step, "step_ms": step * 1e3,
                      "first_step_s": first, "threads": args.threads,
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "torch": torch.__version__, "compile": args.compile}))


if __name__ == "__main__":
    main()
