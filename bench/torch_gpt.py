"""bench/torch_gpt.py — PyTorch's eager training step of spmd's gpt (tools/train/gpt.hpp), for
bench/train_vs_torch, which starts it and talks to it over its stdin and stdout:

  python3 bench/torch_gpt.py FOLDER [--device cpu|cuda] [--compile]
                                        FOLDER holds what bench/torch_child.hpp wrote: manifest.json
                                        (the sizes, each parameter's name and shape) and the
                                        raw little-endian float32 parameters and int64 batches
      --device cuda   the step on the GPU (bench/train_cuda_vs_torch): parameters and the
                      optimizer's state there, each step's batch copied up as it starts, the
                      time taken after torch.cuda.synchronize()
      --compile       the forward and its loss through torch.compile (the first steps compile)
  then, one per line on stdin:
    step S         one step on batch S  -> "ms <milliseconds> loss <loss>"
    quit

The model is spmd's, op for op as a PyTorch user writes it: embedding + positions; per block
layer_norm, the q, k, v projections (F.linear), heads as (batch, heads, position, dim),
q kᵀ / √d + the causal mask, softmax, times v, the output projection, the residual; layer_norm,
linear + bias, the tanh GELU, linear + bias, the residual; the final layer_norm, lm_head and
the mean cross entropy; backward; torch.optim.AdamW(lr=1e-3) (its defaults otherwise, as
spmd's adamw({.lr = 1e-3})); zero_grad. On the CPU one thread (torch.set_num_threads(1)), as
spmd's side; on the GPU AdamW is torch's default there (the foreach implementation).
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def main():
    folder = sys.argv[1]
    rest = sys.argv[2:]
    device = "cpu"
    if "--device" in rest:
        device = rest[rest.index("--device") + 1]
    compiled = "--compile" in rest
    if device == "cpu":
        torch.set_num_threads(1)
    with open(os.path.join(folder, "manifest.json")) as f:
        m = json.load(f)
    V, C, W, H, B = m["vocab"], m["context"], m["width"], m["heads"], m["batch"]
    hd = W // H
    params = {}
    for p in m["params"]:
        a = np.fromfile(os.path.join(folder, p["file"]), dtype="<f4").reshape(p["shape"])
        params[p["name"]] = torch.tensor(a, device=device, requires_grad=True)
    steps = m["steps"]
    tokens = torch.from_numpy(np.fromfile(os.path.join(folder, "tokens.bin"), dtype="<i8").reshape(steps, B, C))
    targets = torch.from_numpy(np.fromfile(os.path.join(folder, "targets.bin"), dtype="<i8").reshape(steps, B, C))
    mask = torch.full((C, C), float("-inf"), device=device).triu(1)
    opt = torch.optim.AdamW(list(params.values()), lr=1e-3)
    P = params

    def split(y):
        return y.view(B, C, H, hd).permute(0, 2, 1, 3)

    def loss_of(tok, tgt):
        h = F.embedding(tok, P["wte"]) + P["wpe"]
        for i in range(2):
            b = lambda n: P["blocks.%d.%s" % (i, n)]
            a = F.layer_norm(h, (W,), b("ln1.weight"), b("ln1.bias"), 1e-5)
            q, k, v = split(F.linear(a, b("attn.wq"))), split(F.linear(a, b("attn.wk"))), split(F.linear(a, b("attn.wv")))
            scores = q @ k.transpose(2, 3) / math.sqrt(hd) + mask
            o = torch.softmax(scores, dim=3) @ v
            y = o.permute(0, 2, 1, 3).reshape(B, C, W)
            h1 = h + F.linear(y, b("attn.wo"))
            u = F.gelu(F.linear(F.layer_norm(h1, (W,), b("ln2.weight"), b("ln2.bias"), 1e-5), b("mlp.w1"), b("mlp.b1")),
                       approximate="tanh")
            h = h1 + F.linear(u, b("mlp.w2"), b("mlp.b2"))
        logits = F.linear(F.layer_norm(h, (W,), P["ln_f.weight"], P["ln_f.bias"], 1e-5), P["lm_head"])
        return F.cross_entropy(logits.reshape(B * C, V), tgt.reshape(B * C))

    if compiled:
        loss_of = torch.compile(loss_of)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        s = int(words[1]) % steps
        t0 = time.perf_counter()
        loss = loss_of(tokens[s].to(device), targets[s].to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
        sync()
        ms = (time.perf_counter() - t0) * 1e3
        print("ms %.4f loss %.7f" % (ms, loss.item()), flush=True)


if __name__ == "__main__":
    main()
