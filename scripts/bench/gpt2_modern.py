"""The same GPT-2 as tests/reference/gpt2_model.py, written the way a PyTorch 2.x user writes it
today: F.scaled_dot_product_attention(is_causal=True) for the attention core, F.gelu with the tanh
approximation, a bias-free LM head (nn.Linear) whose weight is the token embedding's (tied), and
nn.Embedding / nn.LayerNorm. Same parameters, shapes and initialisation as the reference model, so
the FLOPs per step are the same; used by scripts/bench/gpt_torch.py --modern (PyTorch >= 2.0;
gpt_torch.py --bf16 runs its forward and loss under torch.autocast("cpu", dtype=torch.bfloat16)).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERNORM_EPS = 1e-5


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B,NH,T,hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, n_layer, n_embd, n_head, context, vocab):
        super().__init__()
        self.n_layer = n_layer
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(context, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=LAYERNORM_EPS)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def init_gpt2(self, generator, std=0.02):
        """As tests/reference/gpt2_model.py: normal(0, std) weights, c_proj scaled by
        1/sqrt(2*n_layer), zero biases, unit layernorm gains."""
        proj_std = std / math.sqrt(2 * self.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, proj_std, generator=generator)
                elif p.dim() == 2:
                    p.normal_(0.0, std, generator=generator)
                elif ".ln_" in name or name.startswith("ln_f"):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:
                    p.zero_()

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss
