"""A minimal GPT-2 in plain PyTorch, written out explicitly (no transformers).

Shared by tests/reference/gpt2_reference.py (golden values) and scripts/bench/gpt_torch.py
(the PyTorch side of the CPU benchmark), so both measure the same architecture as Singularity:

  x = wte[idx] + wpe[pos]
  per block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
  attn: c_attn Linear(C,3C) -> q = [0,C), k = [C,2C), v = [2C,3C); head h = channels
        [h*hs,(h+1)*hs) of each; causal softmax(q k^T / sqrt(hs)) v; c_proj Linear(C,C)
  mlp:  c_fc Linear(C,4C), GELU (tanh approximation), c_proj Linear(4C,C)
  ln_f, then logits = x @ wte^T (tied). LayerNorm eps 1e-5. Loss = mean cross-entropy.

Parameter names follow Hugging Face GPT-2 minus the "transformer." prefix, with weights stored
(out, in) like nn.Linear (HF stores Conv1D weights transposed; we do not).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERNORM_EPS = 1e-5


def gelu_tanh(x):
    # Written out rather than F.gelu(approximate="tanh") so float64 runs use the same formula.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, context):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        # True above the diagonal: positions a query may not see.
        self.register_buffer(
            "future", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1),
            persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B,NH,T,hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B,NH,T,T)
        scores = scores.masked_fill(self.future[:T, :T], float("-inf"))
        att = F.softmax(scores, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(gelu_tanh(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, context):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)
        self.attn = CausalSelfAttention(n_embd, n_head, context)
        self.ln_2 = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    def __init__(self, n_layer, n_embd, n_head, context, vocab):
        super().__init__()
        self.n_layer, self.n_embd, self.n_head = n_layer, n_embd, n_head
        self.context, self.vocab = context, vocab
        self.wte = nn.Parameter(torch.empty(vocab, n_embd))
        self.wpe = nn.Parameter(torch.empty(context, n_embd))
        self.h = nn.ModuleList([Block(n_embd, n_head, context) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)

    def init_gpt2(self, generator, std=0.02):
        """GPT-2 initialisation: normal(0, std) weights, c_proj scaled by 1/sqrt(2*n_layer),
        zero biases, unit layernorm gains."""
        proj_std = std / math.sqrt(2 * self.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, proj_std, generator=generator)
                elif name in ("wte", "wpe") or name.endswith(".weight") and p.dim() == 2:
                    p.normal_(0.0, std, generator=generator)
                elif ".ln_" in name or name.startswith("ln_f"):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    p.zero_()

    def forward(self, idx, targets=None):
        """idx (B,T) int64 -> logits (B,T,V); with targets also the mean cross-entropy."""
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte[idx] + self.wpe[pos]
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = x @ self.wte.t()
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss


def decay_and_no_decay(model):
    """AdamW parameter groups: weight decay only on tensors with dim >= 2 (wte, wpe, Linear
    weights); never on biases or layernorm parameters."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return decay, no_decay


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
