#!/usr/bin/env python3
"""Golden values for the Llama whole-model test (docs/architecture.md, "Testing"): a tiny
transformers LlamaForCausalLM's logits, loss and every parameter gradient, computed in float64
from float32 initial weights, for a tied and an untied head.

    ~/.cache/singularity/interop-venv/bin/python tests/reference/llama_reference.py

(the interop venv of scripts/setup: transformers 4.36.2 on Debian's torch). Writes
tests/reference/llama_tiny_{tied,untied}.safetensors holding:
  param.<name>  F32  initial weights under transformers' names ((out, in) Linear layout)
  grad.<name>   F32  d(mean loss)/d(param) at the initial weights
  inputs, targets  I32 (B,T)
  logits        F32  (B,T,V)
  loss          F32  (1)   mean cross-entropy of logits[b,t] against targets[b,t] (no shift)
__metadata__ holds the config as strings. Tied: lm_head is model.embed_tokens, stored once.
"""
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_writer import write_safetensors  # noqa: E402

CONFIG = dict(n_layer=2, n_embd=64, n_head=4, n_kv_head=2, intermediate=96, context=32, vocab=100,
              rope_theta=500.0, rms_norm_eps=1e-5)
BATCH = 3
SEED = 20261206
INIT_STD = 0.08  # larger than 0.02 so the attention is far from uniform


def hf_config(tied):
    c = CONFIG
    return LlamaConfig(vocab_size=c["vocab"], hidden_size=c["n_embd"],
                       intermediate_size=c["intermediate"], num_hidden_layers=c["n_layer"],
                       num_attention_heads=c["n_head"], num_key_value_heads=c["n_kv_head"],
                       max_position_embeddings=c["context"], rope_theta=c["rope_theta"],
                       rms_norm_eps=c["rms_norm_eps"], tie_word_embeddings=tied,
                       attention_bias=False)


def initial_weights(model, generator):
    """Every weight N(0, INIT_STD); the norms' weights 1 + 0.1 randn so their gradients count."""
    weights = {}
    for name, p in model.named_parameters():
        if p.dim() == 1:
            weights[name] = 1.0 + 0.1 * torch.randn(p.shape, generator=generator)
        else:
            weights[name] = INIT_STD * torch.randn(p.shape, generator=generator)
    return weights


def loss_and_grads(model, inputs, targets):
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=inputs).logits
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def write_golden(tied, path):
    generator = torch.Generator().manual_seed(SEED + tied)
    torch.set_default_dtype(torch.float64)  # transformers 4.36's causal mask, on torch 1.13
    model = LlamaForCausalLM(hf_config(tied)).double()
    weights = initial_weights(model, generator)
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.copy_(weights[n].double())
    B, T, V = BATCH, CONFIG["context"], CONFIG["vocab"]
    inputs = torch.randint(0, V, (B, T), generator=generator)
    targets = torch.randint(0, V, (B, T), generator=generator)
    logits, loss, grads = loss_and_grads(model, inputs, targets)
    tensors = [(f"param.{n}", w.float()) for n, w in weights.items()]
    tensors += [(f"grad.{n}", g.float()) for n, g in grads.items()]
    tensors += [("inputs", inputs.to(torch.int32)), ("targets", targets.to(torch.int32)),
                ("logits", logits.float()), ("loss", loss.float().reshape(1))]
    import transformers
    metadata = {k: str(v) for k, v in CONFIG.items()}
    metadata.update({"format": "singularity llama reference v1",
                     "generator": "tests/reference/llama_reference.py",
                     "transformers_version": transformers.__version__,
                     "torch_version": torch.__version__, "batch": str(B), "tied": str(int(tied)),
                     "precision": "float64 from the stored float32 weights, rounded to float32"})
    write_safetensors(path, tensors, metadata)
    print(f"wrote {path}: loss {loss.item():.9g}, {len(weights)} tensors")


def main():
    torch.use_deterministic_algorithms(True)
    here = os.path.dirname(os.path.abspath(__file__))
    for tied in (True, False):
        write_golden(tied, os.path.join(here, f"llama_tiny_{'tied' if tied else 'untied'}.safetensors"))


if __name__ == "__main__":
    main()
