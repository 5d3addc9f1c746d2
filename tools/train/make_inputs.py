#!/usr/bin/env python3
"""Initial parameters and data for spmd-train's models (docs/training.md), as safetensors.

    make_inputs.py --model gpt --steps 200 --init INIT.safetensors --data DATA.safetensors [--seed 0]
    make_inputs.py --model mlp ... [--loss-of INIT DATA]   (print step 0's loss, numpy float64)

Parameters: weights normal(0, 0.02) as GPT-2 initialises them (the mlp: normal(0, 1/sqrt(fan_in))),
biases 0, LayerNorm weights 1. Data:
  mlp  x normal(0, 1) (steps, 16, 32) f32; labels = argmax of a fixed random linear map of x,
       so there is something to learn.
  gpt  tokens (steps, 8, 16): each sequence counts up from a random start with a random stride
       in 1..3, modulo 64; targets are the next tokens. A model that has learnt it predicts
       every target but the first of each sequence.
--loss-of computes step 0's loss from the files with numpy in float64, written from the model
definitions alone (an outside implementation: the tests compare spmd-train's first loss).
"""
import argparse
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

V, T, C, H, L, B = 64, 16, 32, 4, 2, 8      # gpt
D_IN, HID, CLS, MB = 32, 64, 16, 16         # mlp


def gpt_params(rng):
    p = {"wte": rng.normal(0, 0.02, (V, C)), "wpe": rng.normal(0, 0.02, (T, C))}
    for i in range(L):
        b = f"blocks.{i}."
        p[b + "ln1.weight"], p[b + "ln1.bias"] = np.ones(C), np.zeros(C)
        for w in ("wq", "wk", "wv", "wo"):
            p[b + "attn." + w] = rng.normal(0, 0.02, (C, C))
        p[b + "ln2.weight"], p[b + "ln2.bias"] = np.ones(C), np.zeros(C)
        p[b + "mlp.w1"], p[b + "mlp.b1"] = rng.normal(0, 0.02, (4 * C, C)), np.zeros(4 * C)
        p[b + "mlp.w2"], p[b + "mlp.b2"] = rng.normal(0, 0.02, (C, 4 * C)), np.zeros(C)
    p["ln_f.weight"], p["ln_f.bias"] = np.ones(C), np.zeros(C)
    p["lm_head"] = rng.normal(0, 0.02, (V, C))
    return p


def gpt_data(rng, steps):
    start = rng.integers(0, V, (steps, B, 1))
    stride = rng.integers(1, 4, (steps, B, 1))
    seq = (start + stride * np.arange(T + 1)) % V
    return {"tokens": seq[..., :T], "targets": seq[..., 1:]}


def mlp_params(rng):
    return {"w1": rng.normal(0, D_IN ** -0.5, (HID, D_IN)), "b1": rng.normal(0, 0.1, HID),
            "w2": rng.normal(0, HID ** -0.5, (CLS, HID)), "b2": rng.normal(0, 0.1, CLS)}


def mlp_data(rng, steps):
    x = rng.normal(0, 1, (steps, MB, D_IN))
    teacher = np.random.default_rng(12345).normal(0, 1, (D_IN, CLS))
    return {"x": x, "labels": np.argmax(x @ teacher, axis=-1)}


def cross_entropy(logits, targets):
    m = logits.max(-1, keepdims=True)
    lse = np.log(np.exp(logits - m).sum(-1)) + m[..., 0]
    picked = np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    return float((lse - picked).mean())


def layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gpt_loss(p, tokens, targets):
    h = p["wte"][tokens] + p["wpe"]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for i in range(L):
        b = f"blocks.{i}."
        a = layer_norm(h, p[b + "ln1.weight"], p[b + "ln1.bias"])
        heads = lambda y: y.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)
        q, k, v = (heads(a @ p[b + "attn." + w].T) for w in ("wq", "wk", "wv"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(C // H) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        y = (s / s.sum(-1, keepdims=True)) @ v
        h = h + y.transpose(0, 2, 1, 3).reshape(B, T, C) @ p[b + "attn.wo"].T
        m = layer_norm(h, p[b + "ln2.weight"], p[b + "ln2.bias"])
        h = h + gelu_tanh(m @ p[b + "mlp.w1"].T + p[b + "mlp.b1"]) @ p[b + "mlp.w2"].T + p[b + "mlp.b2"]
    return cross_entropy(layer_norm(h, p["ln_f.weight"], p["ln_f.bias"]) @ p["lm_head"].T, targets)


def mlp_loss(p, x, labels):
    h = np.maximum(x @ p["w1"].T + p["b1"], 0)
    return cross_entropy(h @ p["w2"].T + p["b2"], labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "gpt"], required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init")
    ap.add_argument("--data")
    ap.add_argument("--loss-of", nargs=2, metavar=("INIT", "DATA"))
    a = ap.parse_args()
    if a.loss_of:
        p = {k: v.astype(np.float64) for k, v in load_file(a.loss_of[0]).items()}
        d = load_file(a.loss_of[1])
        if a.model == "gpt":
            print(f"{gpt_loss(p, d['tokens'][0], d['targets'][0]):.12g}")
        else:
            print(f"{mlp_loss(p, d['x'][0].astype(np.float64), d['labels'][0]):.12g}")
        return 0
    if not (a.init and a.data):
        ap.error("give --init and --data (or --loss-of)")
    rng = np.random.default_rng(a.seed)
    params = gpt_params(rng) if a.model == "gpt" else mlp_params(rng)
    data = gpt_data(rng, a.steps) if a.model == "gpt" else mlp_data(rng, a.steps)
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in params.items()}, a.init)
    save_file({k: np.ascontiguousarray(v, dtype=np.float32 if v.dtype.kind == "f" else np.int64)
               for k, v in data.items()}, a.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
