#!/usr/bin/env python3
"""spmd-train end to end: both models, every dp mode, against one device and each other.

usage: test_train.py GROUP SPMD_TRAIN MAKE_INPUTS [MPIRUN ARGS...]

One build trains on every mesh (its sizes are run-time values). Groups:
  curves   20 AdamW steps of mlp and gpt on meshes 3 (uneven), 5x1, 6, 8, 16 (more ranks than the
           gpt's batch), 2x4, 4x2, 3x2 and (mlp: its hidden features split unevenly) 2x3, FSDP and
           DDP: every loss within 1e-5 relative of the one-device run, the final parameters
           (--save) within the tolerance below; the first loss against make_inputs.py's numpy
           forward (float64, written from the definitions alone); bf16 within 3e-2 of f32; the
           loss falls.
  resume   a checkpoint after 10 of 20 steps on 2x4, resumed on 4x2, on one device and with DDP
           on 8 and on 3: the
           remaining losses continue the uninterrupted curve; resumed at --steps, nothing trains.
  options  SGD, --clip (the norms before clipping are reported; the steps change; the summary
           and the JSON's "clip" name its value), the table without --json, the JSON fields in
           the contract's order, a --save through a symbolic link, a diverging run (NaN in the
           init: null in the JSON, a warning naming step 1, exit 3); DATA over epochs (more steps
           than batches: the data cycled, bit for bit; a file of samples; --shuffle).
  errors   bad input exits 2 with a message naming the problem, and writes nothing; an output
           that cannot be written (a missing directory, a directory, a device, a FIFO) is
           refused before anything trains; a checkpoint of the other model is named as one; a
           full file system fails the save with the reason and leaves no temporary file.
  auto     --parallel auto: mlp and gpt on 2x4, 3 and 1 under the default cost model (it
           replicates these small models: no collective) and under a --cost file of free links
           (FSDP or DDP chosen): every loss within 1e-5 relative of the one-device run, the choice
           reported (the JSON's "dp" and "auto", its fields in order) and run; --memory on 4
           ranks: a budget below every candidate exits 2 naming the least that fits and which,
           that budget runs it, a byte less refuses; between it and twice it the gpt's units mix
           FSDP and DDP (a per-unit model: one device's losses, its --save within 1e-5 of FSDP's,
           a mix of both, every one of the 8 mixes searched; its checkpoint resumed by the mix bit
           for bit and by FSDP on 2 as one device); bad uses exit 2.
  cp       --mesh dp=D,tp=T,cp=C (context parallelism: the gpt's positions split): cp 1, 2, 4, 8,
           beside dp (FSDP and DDP) and tp, in any order: every loss within 1e-5 relative of the
           one-device run, the final parameters within the tolerance below, K and V gathered, the
           JSON's "parallel" {dp, tp, cp} last; --cp-method ring on cp 2, 4, 8, beside dp and tp
           likewise (no K/V gathered); a cp that does not divide the 16 positions, a dim named
           twice or unknown, a size missing, the mlp (no sequence), --parallel auto with cp > 1, an
           unknown --cp-method and the ring on the mlp exit 2 naming it.
  pp       --mesh ...,pp=P --schedule S --microbatches M (pipeline parallelism: the gpt's pieces in
           stages): every schedule on pp 1, 2, 4 with 1, 2, 4, 8 microbatches, and beside dp (FSDP,
           DDP), tp and cp: every loss within 1e-5 relative of the one-device run, the final
           parameters within the tolerance below, the JSON's "parallel" with pp and "schedule" last
           (its bubble the published formula's); a run without a pipeline keeps its JSON; a pp
           the 4 pieces cannot be cut into, microbatches that do not divide the batch, an unknown
           schedule, bf16, --parallel auto and the mlp exit 2 naming the numbers. A pipeline's
           checkpoint (pp=2, after 10 of 20 steps) resumed by itself bit for bit, by pp=4 (zb),
           dp=2,pp=2 (interleaved), 2x2 and one device as one device trains; a 2x2 checkpoint
           resumed by pp=4; resuming past --steps exits 2.
  mpi      mpirun -np D*T*C*P --backend mpi against --backend sim (2x4, 4x2, 2x3, 3x2, 5x1, 16,
           dp=2,cp=2, cp=2 (DDP), tp=2,cp=4, dp=2,cp=2 with --cp-method ring, and
           -np 6 without --mesh: a 1-d mesh of the world size; shuffled epochs on 2x2):
           bit-identical losses and --save files; a wrong process count exits 2; a refusal on every process (a checkpoint of
           another optimizer) is one line and exit 2, with no abort banner; --parallel auto, the
           same bits as the simulation (a per-unit mix on 2x2 too, its --save files equal);
           pipelines (pp=2, pp=4, dp=2,pp=2, tp=2,pp=2): the simulation's bits, its --save and
           --checkpoint files byte for byte (every group writing its pieces into one file), the
           checkpoint resumed under MPI bit for bit; a checkpoint missing one group's tensor ends
           the job naming it.
SPMD_TRAIN_TEST_MESHES=3,2x4 (comma-separated) runs the curves on those meshes only (the
sanitizer build, where each run costs ten times more), saying which it leaves out.
Python's numpy and safetensors are needed (make_inputs.py); without them the test skips (77).
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

GROUP, TRAIN, MAKE = sys.argv[1], sys.argv[2], sys.argv[3]
MPIRUN = sys.argv[4:]
FAILS = []
STEPS = 20
# Final parameters after 20 AdamW steps (lr 0.01), absolute: sharded and one-device runs sum
# in other orders, and AdamW's normalised step can turn a rounding difference in a tiny
# gradient into a larger one in a weight. Measured worst: 1.2e-7 (mlp), 1.2e-5 (gpt).
PARAM_TOL = 1e-4

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError:
    print("SKIP: numpy and safetensors are needed (pip install numpy safetensors)")
    sys.exit(77)


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(*args, mpi=None):
    cmd = ([*MPIRUN, "-np", str(mpi)] if mpi else []) + [TRAIN, *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True), " ".join(cmd)


def train_json(*args, mpi=None):
    p, cmd = run(*args, "--json", mpi=mpi)
    if p.returncode != 0:
        check(False, f"{cmd}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def without(path, name, out):
    """Writes `path`'s safetensors file without tensor `name` (its bytes left where they are)."""
    with open(path, "rb") as f:
        b = f.read()
    n = int.from_bytes(b[:8], "little")
    header = json.loads(b[8:8 + n])
    del header[name]
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b[8 + n:])


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


class Files:
    def __init__(self, d, model, steps=STEPS):
        self.init, self.data = os.path.join(d, model + "-init.st"), os.path.join(d, model + "-data.st")
        subprocess.run([sys.executable, MAKE, "--model", model, "--steps", str(steps), "--init", self.init,
                        "--data", self.data], check=True)

    def args(self, model, mesh, *more):
        return ["--model", model, "--mesh", mesh, "--init", self.init, "--data", self.data, "--steps", STEPS, *more]


def close_params(a, b, what):
    pa, pb = load_file(a), load_file(b)
    check(sorted(pa) == sorted(pb), f"{what}: the saved tensors differ in names")
    worst = 0.0
    for k in pa:
        if k in pb:
            worst = max(worst, float(np.max(np.abs(pa[k].astype(np.float64) - pb[k]))))
    check(worst <= PARAM_TOL, f"{what}: final parameters differ by {worst:.3g} > {PARAM_TOL}")
    return worst


def against_one(r, one, what):
    """Checks run r's losses (1e-5) and norms (1e-4) against the one-device run; the worst loss difference."""
    worst = 0.0
    for s, (a, b) in enumerate(zip(r["losses"], one["losses"])):
        worst = max(worst, rel(a, b))
        check(rel(a, b) <= 1e-5, f"{what}: step {s} loss {a} against one device's {b}")
    for s, (a, b) in enumerate(zip(r["grad_norms"], one["grad_norms"])):
        check(rel(a, b) <= 1e-4, f"{what}: step {s} grad norm {a} against one device's {b}")
    return worst


def curves(d):
    for model in ("mlp", "gpt"):
        f = Files(d, model)
        ref_save = os.path.join(d, model + "-one.st")
        one = train_json(*f.args(model, "1", "--save", ref_save))
        if one is None:
            continue
        numpy_loss = float(subprocess.run([sys.executable, MAKE, "--model", model, "--loss-of", f.init, f.data],
                                          capture_output=True, text=True, check=True).stdout)
        check(rel(one["losses"][0], numpy_loss) <= 1e-5,
              f"{model}: first loss {one['losses'][0]} against numpy's {numpy_loss}")
        check(one["losses"][-1] < 0.8 * one["losses"][0], f"{model}: the loss does not fall: {one['losses']}")
        check(one["collectives_per_step"] == {"all_gather": 0, "all_reduce": 0, "reduce_scatter": 0, "all_to_all": 0},
              f"{model} on one device runs collectives: {one['collectives_per_step']}")
        worst_loss = worst_param = 0.0
        meshes = ("3", "5x1", "6", "8", "16", "2x4", "4x2", "3x2") + (("2x3",) if model == "mlp" else ())
        only = os.environ.get("SPMD_TRAIN_TEST_MESHES")
        if only:
            left = [m for m in meshes if m not in only.split(",")]
            meshes = tuple(m for m in meshes if m in only.split(","))
            print(f"note: SPMD_TRAIN_TEST_MESHES={only}: the curves of {model} on {', '.join(left)} are left out")
        for mesh in meshes:
            for dp in ("fsdp", "ddp"):
                save = os.path.join(d, f"{model}-{mesh}-{dp}.st")
                r = train_json(*f.args(model, mesh, "--dp", dp, "--save", save))
                if r is None:
                    continue
                what = f"{model} on {mesh} ({dp})"
                check(len(r["losses"]) == STEPS, f"{what}: {len(r['losses'])} losses")
                worst_loss = max(worst_loss, against_one(r, one, what))
                worst_param = max(worst_param, close_params(save, ref_save, what))
                c = r["collectives_per_step"]
                if dp == "fsdp":
                    check(c["all_gather"] > 0 and c["reduce_scatter"] > 0, f"{what}: FSDP ran no gathers: {c}")
                    check(r["bytes_per_rank"] < one["bytes_per_rank"] / 2, f"{what}: FSDP holds {r['bytes_per_rank']} bytes")
                else:
                    check(c["all_gather"] == 0 and c["reduce_scatter"] == 0, f"{what}: DDP gathered: {c}")
        print(f"{model}: worst loss difference {worst_loss:.3g} (relative), worst parameter difference "
              f"{worst_param:.3g}")
        r16 = train_json(*f.args(model, "2x4", "--dtype", "bf16"))
        if r16:
            worst = max(rel(a, b) for a, b in zip(r16["losses"], one["losses"]))
            print(f"{model}: bf16 against f32, worst loss difference {worst:.3g} (relative)")
            check(worst <= 3e-2, f"{model}: bf16 losses differ from f32 by {worst:.3g}")
            check(r16["losses"] != one["losses"], f"{model}: bf16 gave f32's losses exactly")


def resume(d):
    for model in ("mlp", "gpt"):
        f = Files(d, model)
        ck = os.path.join(d, model + "-ck.st")
        full = train_json(*f.args(model, "2x4", "--checkpoint", ck, "--checkpoint-at", 10))
        if full is None:
            continue
        # Resharded resume: onto another 2-d mesh, one device, and data-parallel meshes (8, and
        # 3: uneven).
        for mesh, dp in (("4x2", "fsdp"), ("1", "fsdp"), ("8", "ddp"), ("3", "ddp")):
            r = train_json(*f.args(model, mesh, "--dp", dp, "--resume", ck))
            if r is None:
                continue
            check(len(r["losses"]) == 10, f"{model}: resumed on {mesh}, {len(r['losses'])} losses (10 expected)")
            for s, (a, b) in enumerate(zip(r["losses"], full["losses"][10:])):
                check(rel(a, b) <= 1e-5, f"{model}: resumed on {mesh} ({dp}), step {10 + s} loss {a} against {b}")
        # Same mesh and backend: bit for bit.
        same = train_json(*f.args(model, "2x4", "--resume", ck))
        if same:
            check(same["losses"] == full["losses"][10:], f"{model}: resumed on 2x4 is not bit-identical")
        # Resumed at --steps: nothing to train, and the table says so (no NaN losses).
        p, cmd = run("--model", model, "--mesh", "2x4", "--init", f.init, "--data", f.data, "--steps", 10,
                     "--resume", ck)
        check(p.returncode == 0 and "0 steps from step 10, nothing left to train" in p.stdout and
              "nan" not in p.stdout, f"{cmd}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")


def options(d):
    f = Files(d, "mlp")
    mesh = "2x4"
    base = train_json(*f.args("mlp", mesh))
    sgd = train_json(*f.args("mlp", mesh, "--optimizer", "sgd", "--lr", "0.05"))
    if base and sgd:
        check(list(sgd) == ["model", "mesh", "backend", "dp", "dtype", "optimizer", "lr", "steps", "losses",
                            "grad_norms", "bytes_per_rank", "collectives_per_step", "clip", "shuffle",
                            "steps_per_epoch", "epoch", "parallel"], f"JSON fields: {list(sgd)}")  # "auto" only with --parallel auto
        check(sgd["parallel"] == {"dp": 2, "tp": 4, "cp": 1}, f"mesh {mesh}: JSON parallel {sgd['parallel']}")
        check(sgd["clip"] is None, f"no --clip, JSON clip {sgd['clip']!r}")
        check(sgd["shuffle"] is None and sgd["steps_per_epoch"] == STEPS and sgd["epoch"] == 0,
              f"the data's order, one epoch of {STEPS} batches: {sgd['shuffle']}, {sgd['steps_per_epoch']}, {sgd['epoch']}")
        check(sgd["optimizer"] == "sgd" and sgd["lr"] == 0.05, f"sgd run reports {sgd['optimizer']} {sgd['lr']}")
        check(sgd["losses"][0] == base["losses"][0] and sgd["losses"][-1] < sgd["losses"][0] and
              sgd["losses"][1:] != base["losses"][1:], "SGD: same first loss, falling, unlike AdamW's")
        # AdamW's state (two f32 per parameter) against SGD's momentum (one): 4 bytes more per element.
        check(base["bytes_per_rank"] > sgd["bytes_per_rank"], "AdamW holds no more than SGD")
    clip = train_json(*f.args("mlp", mesh, "--clip", "0.5"))
    if base and clip:
        check(clip["grad_norms"][0] == base["grad_norms"][0] and clip["losses"][0] == base["losses"][0],
              "--clip changes the first step's loss or norm (they come before the clipping)")
        check(clip["losses"][1:] != base["losses"][1:], "--clip 0.5 changed nothing")
        check(clip["clip"] == 0.5, f"--clip 0.5: JSON clip {clip['clip']!r}")
    p, cmd = run(*f.args("mlp", mesh, "--clip", "1e-7"))
    lines = [l for l in p.stdout.splitlines() if l.strip() and l.split()[0].count("/") == 1]
    check(p.returncode == 0 and len(lines) == STEPS, f"{cmd}: {len(lines)} progress lines\n{p.stdout}")
    check("loss" in p.stdout and "collectives per step" in p.stdout, f"{cmd}: no summary\n{p.stdout}")
    check("clip 1e-07)" in p.stdout, f"{cmd}: the summary does not name clip 1e-07:\n{p.stdout}")

    # --save through a symbolic link: the file it names is replaced, the link stays.
    real, link = os.path.join(d, "real.st"), os.path.join(d, "link.st")
    with open(real, "wb") as fh:
        fh.write(b"old")
    os.symlink("real.st", link)
    p, cmd = run(*f.args("mlp", mesh, "--save", link))
    check(p.returncode == 0 and os.path.islink(link) and sorted(load_file(real)) == ["b1", "b2", "w1", "w2"],
          f"{cmd}: exit {p.returncode}, link kept {os.path.islink(link)}\n{p.stderr}")
    check(not os.path.exists(real + ".tmp"), f"{cmd}: left {real}.tmp")

    # A run that diverges: NaN in a weight. Every step printed, null in the JSON, a warning
    # naming the first step, exit 3 for scripts; the table keeps "nan".
    from safetensors.numpy import save_file
    bad = load_file(f.init)
    w = bad["w1"].copy()
    w[0, 0] = np.nan
    bad["w1"] = w
    nan_init = os.path.join(d, "nan-init.st")
    save_file(bad, nan_init)
    args = ["--model", "mlp", "--mesh", mesh, "--init", nan_init, "--data", f.data, "--steps", 3]
    p, cmd = run(*args, "--json")
    check(p.returncode == 3, f"{cmd}: exit {p.returncode} (3 expected)\n{p.stderr}")
    check("diverged at step 1" in p.stderr, f"{cmd}: the warning does not name step 1: {p.stderr!r}")
    try:
        j = json.loads(p.stdout.strip().splitlines()[-1])  # strict JSON: no NaN, no strings in a list of numbers
        check(j["losses"] == [None, None, None], f"{cmd}: losses {j['losses']}")
    except (ValueError, IndexError) as e:
        check(False, f"{cmd}: the JSON does not parse ({e}): {p.stdout!r}")
    p, cmd = run(*args)
    check(p.returncode == 3 and "nan" in p.stdout and "diverged at step 1" in p.stderr,
          f"{cmd}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    epochs(d)


def epochs(d):
    """DATA's samples cycled over epochs: 12 steps over 5 batches of data train as 12 steps over
    the same data written out three times, bit for bit; --shuffle reorders them each epoch
    (other losses, the same on one device and on 2x2 within 1e-5: a step reads the same
    samples); the JSON and the summary name the epoch."""
    from safetensors.numpy import save_file
    f = Files(d, "gpt", steps=5)
    data = load_file(f.data)
    thrice = os.path.join(d, "gpt-thrice.st")
    save_file({k: np.concatenate([v, v, v]) for k, v in data.items()}, thrice)
    args = ["--model", "gpt", "--init", f.init, "--steps", "12"]
    cycled = train_json(*args, "--mesh", "1", "--data", f.data)
    long = train_json(*args, "--mesh", "1", "--data", thrice)
    if cycled and long:
        check(cycled["losses"] == long["losses"], "12 steps over 5 batches: not the data three times over")
        check(cycled["steps_per_epoch"] == 5 and cycled["epoch"] == 2 and long["steps_per_epoch"] == 15 and
              long["epoch"] == 0, f"epochs: {cycled['steps_per_epoch']}, {cycled['epoch']}; {long['steps_per_epoch']}, "
                                  f"{long['epoch']}")
    # Samples (20, 16), not batches: the same samples.
    flat = os.path.join(d, "gpt-flat.st")
    save_file({k: v.reshape(-1, v.shape[-1]) for k, v in data.items()}, flat)
    p = train_json(*args, "--mesh", "1", "--data", flat)
    if p and cycled:
        check(p["losses"] == cycled["losses"], "a file of samples (40, 16) trains as one of batches (5, 8, 16)")
    one = train_json(*args, "--mesh", "1", "--data", f.data, "--shuffle", "4")
    two = train_json(*args, "--mesh", "2x2", "--data", f.data, "--shuffle", "4")
    if one and two and cycled:
        check(one["losses"] != cycled["losses"] and one["losses"][0] != cycled["losses"][0], "--shuffle 4 changed nothing")
        check(one["shuffle"] == 4, f"JSON shuffle {one['shuffle']!r}")
        for s, (a, b) in enumerate(zip(two["losses"], one["losses"])):
            check(rel(a, b) <= 1e-5, f"--shuffle 4 on 2x2: step {s} loss {a} against one device's {b}")
    p, cmd = run(*args, "--mesh", "1", "--data", f.data, "--shuffle", "4")
    check(p.returncode == 0 and "5 batches an epoch, shuffled (seed 4 + the epoch), the last step in epoch 2" in p.stdout,
          f"{cmd}: the summary does not name the epochs\n{p.stdout}")


def errors(d):
    f = Files(d, "gpt")
    g = Files(d, "mlp")
    out = os.path.join(d, "out.st")
    ck = os.path.join(d, "never.st")
    import numpy as np
    from safetensors.numpy import save_file
    p0 = load_file(f.init)
    d0 = load_file(f.data)

    def changed(base, name, change):
        q = dict(base)
        change(q)
        path = os.path.join(d, name)
        save_file(q, path)
        return path

    bad_init = lambda name, change: changed(p0, name, change)
    bad_data = lambda name, change: changed(d0, name, change)

    missing = bad_init("missing.st", lambda q: q.pop("blocks.1.attn.wv"))
    shape = bad_init("shape.st", lambda q: q.update({"lm_head": np.zeros((64, 31), np.float32)}))
    dtype = bad_init("dtype.st", lambda q: q.update({"wte": q["wte"].astype(np.float64)}))
    def oob(q):
        t = q["tokens"].copy()
        t[3, 2, 5] = 64
        q["tokens"] = t
    token = bad_data("token.st", oob)
    tiny = bad_data("tiny.st", lambda q: q.update({k: v[:1, :3] for k, v in q.items()}))  # 3 samples
    narrow = bad_data("narrow.st", lambda q: q.update({"tokens": q["tokens"][:, :, :15]}))
    garbage = os.path.join(d, "garbage.st")
    with open(garbage, "wb") as fh:
        fh.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    mesh = "2x4"
    cases = [
        (["--model", "gpt", "--mesh", mesh, "--init", missing, "--data", f.data], ["blocks.1.attn.wv"]),
        (["--model", "gpt", "--mesh", mesh, "--init", shape, "--data", f.data], ["lm_head", "(64, 32)", "(64, 31)"]),
        (["--model", "gpt", "--mesh", mesh, "--init", dtype, "--data", f.data], ["wte", "F32", "F64"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", token], ["tokens[3, 2, 5] = 64"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", tiny], ["tiny.st", "3 samples", "one batch of 8"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", narrow],
         ["narrow.st", "'tokens'", "I64 (samples, 16)", "(20, 8, 15)"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--shuffle", "-1"], ["--shuffle -1"]),
        (["--model", "gpt", "--mesh", mesh, "--init", os.path.join(d, "absent.st"), "--data", f.data], ["absent.st"]),
        (["--model", "gpt", "--mesh", mesh, "--init", garbage, "--data", f.data], ["garbage.st"]),
        (["--model", "mlp", "--mesh", mesh, "--init", f.init, "--data", g.data], ["w1"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--graph"], ["--graph", "--backend cuda", "not sim"]),
        (["--model", "gpt", "--mesh", "1x3", "--init", f.init, "--data", f.data], ["1x3", "does not divide", "4 heads"]),
        (["--model", "gpt", "--mesh", "2x3", "--init", f.init, "--data", f.data], ["2x3", "does not divide", "4 heads"]),
        (["--model", "mlp", "--mesh", "1x65", "--init", g.init, "--data", g.data], ["1x65", "64 hidden features", "at most 64"]),
        (["--model", "gpt", "--mesh", "2y4", "--init", f.init, "--data", f.data], ["2y4"]),
        (["--model", "gpt", "--mesh", "0", "--init", f.init, "--data", f.data], ["--mesh 0", "from 1 to 999999"]),
        (["--model", "gpt", "--mesh", "4x0", "--init", f.init, "--data", f.data], ["--mesh 4x0"]),
        (["--model", "gpt", "--mesh", "1000000", "--init", f.init, "--data", f.data], ["--mesh 1000000"]),
        (["--model", "gpt", "--mesh", "100000x100000", "--init", f.init, "--data", f.data],
         ["--mesh 100000x100000", "more than a mesh holds"]),
        (["--model", "gpt", "--init", f.init, "--data", f.data], ["--mesh is required", "mpirun"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--dp", "ddp", "--dtype", "bf16"], ["bf16", "fsdp"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--backend", "tpu"], ["tpu"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--resume", f.init], ["spmd.optimizer"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--checkpoint-at", "3"], ["--checkpoint"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--lr", "-1"], ["--lr"]),
        # The option parser's own refusals carry the tool's name too.
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--lr", "fast"],
         ["spmd-train: ", "--lr", "fast"]),
        (["--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--learning-rate", "1"],
         ["spmd-train: ", "--learning-rate"]),
    ]
    for args, words in cases:
        p, cmd = run(*args, "--steps", STEPS, "--save", out, "--checkpoint", ck, "--checkpoint-at", "2")
        if "--checkpoint-at" in args:  # the case is the missing --checkpoint itself
            p, cmd = run(*args, "--steps", STEPS, "--save", out)
        check(p.returncode == 2, f"{cmd}: exit {p.returncode} (2 expected)\n{p.stderr}")
        check(all(w in p.stderr for w in words), f"{cmd}: the message does not name {words}: {p.stderr!r}")
        check(p.stdout == "", f"{cmd}: printed {p.stdout!r}")
        check(not os.path.exists(out) and not os.path.exists(ck), f"{cmd}: wrote a file")
    # Values named as written: a step 0 is a bad step (not a missing flag), a tiny negative
    # clip is not printed as "-0.000000".
    for args, words in ((["--checkpoint", ck, "--checkpoint-at", "0"], ["--checkpoint-at 0", "must be a step in 1.."]),
                        (["--clip", "-1e-9"], ["--clip -1e-09", "must be positive"])):
        p, cmd = run("--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--steps", STEPS, *args)
        check(p.returncode == 2, f"{cmd}: exit {p.returncode} (2 expected)\n{p.stderr}")
        check(all(w in p.stderr for w in words), f"{cmd}: the message does not name {words}: {p.stderr!r}")
        check(p.stdout == "" and not os.path.exists(ck), f"{cmd}: trained or wrote before refusing")
    # An output that cannot be written is refused before anything trains, not after the run;
    # a device or a FIFO is never replaced by the file (docs/files.md).
    nowhere = os.path.join(d, "absent-dir", "out.st")
    fifo = os.path.join(d, "fifo")
    os.mkfifo(fifo)
    for args, words in ((["--save", nowhere], ["--save", "absent-dir", "does not exist"]),
                        (["--save", d], ["--save", "is a directory"]),
                        (["--checkpoint", nowhere, "--checkpoint-at", "2"], ["--checkpoint", "absent-dir", "does not exist"]),
                        (["--save", "/dev/full"], ["--save /dev/full: is a character device, not a regular file"]),
                        (["--checkpoint", "/dev/full", "--checkpoint-at", "2"], ["--checkpoint /dev/full: is a character device"]),
                        (["--save", fifo], ["--save " + fifo + ": is a FIFO, not a regular file"]),
                        (["--save", "/dev/stdout"], ["--save /dev/stdout: is one of this process's descriptors"])):
        p, cmd = run("--model", "gpt", "--mesh", mesh, "--init", f.init, "--data", f.data, "--steps", STEPS, *args)
        check(p.returncode == 2, f"{cmd}: exit {p.returncode} (2 expected)\n{p.stderr}")
        check(all(w in p.stderr for w in words), f"{cmd}: the message does not name {words}: {p.stderr!r}")
        check(p.stdout == "", f"{cmd}: trained before refusing: {p.stdout!r}")
    check(os.path.exists("/dev/full") and not os.path.isfile("/dev/full") and not os.path.exists("/dev/full.tmp"),
          "/dev/full was replaced or a /dev/full.tmp left")
    check(not os.path.isfile(fifo) and sorted(os.listdir(d)).count("fifo.tmp") == 0, "the FIFO was replaced")

    # --resume with the other model's checkpoint says so.
    mlp_ck = os.path.join(d, "mlp-ck.st")
    p, cmd = run("--model", "mlp", "--mesh", "1", "--init", g.init, "--data", g.data, "--steps", "2",
                 "--checkpoint", mlp_ck, "--checkpoint-at", "2")
    check(p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run("--model", "gpt", "--mesh", "1", "--init", f.init, "--data", f.data, "--steps", STEPS, "--resume", mlp_ck)
    check(p.returncode == 2 and "is a checkpoint of the mlp model; this run trains the gpt" in p.stderr and p.stdout == "",
          f"{cmd}: exit {p.returncode}\n{p.stderr}")

    # A full file system: the save fails with the reason, exit 2, and nothing is left in the
    # directory. A 16 KiB tmpfs in a mount namespace of the test's own (root or CAP_SYS_ADMIN).
    small = os.path.join(d, "small")
    os.mkdir(small)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=16k tmpfs "$0"', small],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"note: skipped the full file system: cannot mount a tmpfs here ({probe.stderr.strip()})")
    else:
        script = 'mount -t tmpfs -o size=16k tmpfs "$0" && "$@"; rc=$?; echo "left: $(ls -A "$0")"; exit $rc'
        cmd = ["unshare", "-m", "sh", "-c", script, small, TRAIN, "--model", "gpt", "--mesh", "1", "--init", f.init,
               "--data", f.data, "--steps", "2", "--save", os.path.join(small, "out.st")]
        p = subprocess.run(cmd, capture_output=True, text=True)
        check(p.returncode == 2 and "out.st.tmp: write failed: No space left on device" in p.stderr,
              f"full file system: exit {p.returncode}\n{p.stderr}")
        check(p.stdout.rstrip().endswith("left:"), f"full file system: files left behind: {p.stdout[-200:]!r}")


def cost_file(d, name, mesh, alpha, beta):
    """A --cost file (bench/auto_calibrate's form) with the same link on every mesh dim."""
    path = os.path.join(d, name)
    with open(path, "w") as f:
        json.dump({"mesh": mesh, "links": [{"alpha_s": alpha, "beta_s_per_byte": beta} for _ in mesh],
                   "flops_per_s": 5e10, "memory_bytes_per_s": 2e10}, f)
    return path


def auto(d):
    fields = ["choice", "step_s", "unrestricted_step_s", "optimal", "candidates", "search_ms", "units", "mixes",
              "exhaustive"]
    for model in ("mlp", "gpt"):
        f = Files(d, model)
        one = train_json(*f.args(model, "1"))
        if one is None:
            continue
        for mesh, cost in (("2x4", None), ("3", None), ("1", None), ("2x4", (1e-12, 1e-15)), ("4", (1e-12, 1e-15))):
            more = ["--parallel", "auto"]
            if cost:
                shape = [int(x) for x in mesh.split("x")]
                more += ["--cost", cost_file(d, f"free-{mesh}.json", shape, *cost)]
            what = f"{model} {mesh} --parallel auto" + (" (free links)" if cost else "")
            r = train_json(*f.args(model, mesh, *more))
            if r is None:
                continue
            c = r.get("auto")
            check(list(r)[-2:] == ["auto", "parallel"] and c is not None and list(c) == fields,
                  f"{what}: the JSON's last fields are {list(r)[-2:]}, auto {c}")
            if not c:
                continue
            worst = max(rel(a, b) for a, b in zip(r["losses"], one["losses"]))
            check(worst <= 1e-5, f"{what}: losses differ from one device's by {worst:.3g} (relative)")
            check(r["dp"] == c["choice"] and c["choice"] in c["candidates"], f"{what}: dp {r['dp']}, choice {c['choice']}")
            best = min(v["step_s"] for v in c["candidates"].values() if v["step_s"] is not None)
            check(c["step_s"] == best and c["unrestricted_step_s"] <= best * (1 + 1e-9),
                  f"{what}: chose {c['step_s']} of {c['candidates']}, unrestricted {c['unrestricted_step_s']}")
            ran = sum(r["collectives_per_step"].values())
            if c["choice"] == "replicate":
                check(ran == 0 and c["candidates"]["replicate"]["collectives"] == 0, f"{what}: replicate ran {ran} collectives")
            if cost and mesh != "1":
                # collectives for (almost) nothing: splitting the work wins
                check(c["choice"] in ("fsdp", "ddp") and ran > 0, f"{what}: chose {c['choice']} with free links")
            if not cost and mesh != "1":
                check(c["choice"] == "replicate" and c["optimal"], f"{what}: chose {c['choice']} (optimal: {c['optimal']})")
        # the table names the choice
        p, cmd = run(*f.args(model, "2x4", "--parallel", "auto"))
        check(p.returncode == 0 and "parallel auto: replicate" in p.stdout and "(sim, replicate," in p.stdout,
              f"{cmd}: exit {p.returncode}\n{p.stdout[-600:]}")
        # --memory: below every candidate, exit 2 naming the least a rank needs and the candidate
        # that needs it; that budget runs that candidate (one device's losses), a byte less
        # exits 2 again; a budget nothing reaches chooses as no budget does
        p, cmd = run(*f.args(model, "4", "--parallel", "auto", "--memory", "1"))
        said = re.search(r"the least memory a rank needs is (\d+) bytes \((\w+)\)", p.stderr)
        check(p.returncode == 2 and said is not None and p.stderr.startswith("spmd-train: --memory 1: no parallelisation fits"),
              f"{cmd}: exit {p.returncode}\n{p.stderr}")
        if said:
            least, name = said.group(1), said.group(2)
            r = train_json(*f.args(model, "4", "--parallel", "auto", "--memory", least))
            if r is not None:
                check(r["dp"] == name and r["auto"]["choice"] == name, f"{model} --memory {least}: ran {r['dp']}, not {name}")
                worst = max(rel(a, b) for a, b in zip(r["losses"], one["losses"]))
                check(worst <= 1e-5, f"{model} --memory {least}: losses differ from one device's by {worst:.3g}")
            p, cmd = run(*f.args(model, "4", "--parallel", "auto", "--memory", str(int(least) - 1)))
            check(p.returncode == 2 and f"needs is {least} bytes ({name})" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
            if model == "gpt":
                per_unit(d, f, one, int(least))
        free = train_json(*f.args(model, "4", "--parallel", "auto", "--memory", "1e30"))
        none = train_json(*f.args(model, "4", "--parallel", "auto"))
        if free is not None and none is not None:
            a, b = dict(free["auto"]), dict(none["auto"])
            a.pop("search_ms"), b.pop("search_ms")
            check(a == b, f"{model} --memory 1e30 chose {a}, without a budget {b}")
    f = Files(d, "mlp")
    other = cost_file(d, "other.json", [2, 2], 1e-6, 1e-10)
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as x:
        x.write("{not json")
    for args, said in ((["--parallel", "manual"], "--parallel manual: choose one of auto"),
                       (["--parallel", "auto", "--dp", "ddp"], "leave out --dp ddp"),
                       (["--parallel", "auto", "--dtype", "bf16"], "--parallel auto trains in f32"),
                       (["--cost", other], "--parallel auto"),
                       (["--memory", "5"], "--memory 5 is the memory budget of --parallel auto's search"),
                       (["--parallel", "auto", "--memory", "-5"], "--memory -5: give the bytes a rank may hold"),
                       (["--parallel", "auto", "--memory", "0"], "--memory 0: give the bytes a rank may hold"),
                       (["--parallel", "auto", "--cost", os.path.join(d, "none.json")], "none.json"),
                       (["--parallel", "auto", "--cost", bad], "not JSON"),
                       (["--parallel", "auto", "--cost", other], "other.json")):
        p, cmd = run(*f.args("mlp", "2x4", *args))
        check(p.returncode == 2 and said in p.stderr and p.stderr.startswith("spmd-train: --"),
              f"{cmd}: exit {p.returncode}\n{p.stderr}")


def per_unit(d, f, one, least):
    """Budgets between the least (every unit FSDP) and twice it: the gpt's units mix FSDP and DDP."""
    import numpy as np
    from safetensors.numpy import load_file
    fsdp_file = os.path.join(d, "gpt-fsdp-4.st")
    fsdp = train_json(*f.args("gpt", "4", "--dp", "fsdp", "--save", fsdp_file))
    mixed = 0
    for k in (1.2, 1.5, 2.0):
        budget = str(int(least * k))
        what = f"gpt 4 --parallel auto --memory {budget}"
        saved = os.path.join(d, f"gpt-mix-{k}.st")
        r = train_json(*f.args("gpt", "4", "--parallel", "auto", "--memory", budget, "--save", saved))
        if r is None:
            continue
        c = r["auto"]
        check(list(c["units"]) == ["", "blocks.0", "blocks.1"] and c["mixes"] == 8 and c["exhaustive"],
              f"{what}: units {c['units']}, {c['mixes']} mixes")
        if c["choice"] != "per-unit":
            continue
        mixed += 1
        check(r["dp"] == "per-unit" and set(c["units"].values()) == {"fsdp", "ddp"}, f"{what}: ran {r['dp']}, units {c['units']}")
        check(c["step_s"] < c["candidates"]["fsdp"]["step_s"] and
              (c["candidates"]["ddp"]["step_s"] is None or c["step_s"] <= c["candidates"]["ddp"]["step_s"]) and
              c["step_s"] == c["candidates"]["per-unit"]["step_s"], f"{what}: {c['step_s']} of {c['candidates']}")
        worst = max(rel(a, b) for a, b in zip(r["losses"], one["losses"]))
        check(worst <= 1e-5, f"{what}: losses differ from one device's by {worst:.3g} (relative)")
        if fsdp is not None:
            a, b = load_file(saved), load_file(fsdp_file)
            check(list(a) == list(b), f"{what}: --save holds {list(a)}, FSDP's {list(b)}")
            diff = max(float(np.abs(a[n] - b[n]).max()) for n in a if n in b)
            check(diff <= 1e-5, f"{what}: --save differs from FSDP's by {diff:.3g}")
        # a mix's checkpoint (an optimizer per unit, one file): resumed by the mix bit for bit, and
        # by FSDP (any parallelisation reads it) as one device
        ck = os.path.join(d, "mix-ck.st")
        w = train_json(*f.args("gpt", "4", "--parallel", "auto", "--memory", budget, "--checkpoint", ck, "--checkpoint-at", "10"))
        if w is not None:
            check(w["dp"] == "per-unit" and w["losses"] == r["losses"] and os.path.exists(ck),
                  f"{what} --checkpoint: ran {w['dp']}, losses {'equal' if w['losses'] == r['losses'] else 'differ'}")
            same = train_json(*f.args("gpt", "4", "--parallel", "auto", "--memory", budget, "--resume", ck))
            if same is not None:
                check(same["dp"] == "per-unit" and same["losses"] == r["losses"][10:] and same["grad_norms"] == r["grad_norms"][10:],
                      f"{what} --resume: not the uninterrupted run's losses bit for bit")
            other = train_json(*f.args("gpt", "2", "--dp", "fsdp", "--resume", ck))
            if other is not None:
                worst = max(rel(a, b) for a, b in zip(other["losses"], one["losses"][10:]))
                check(len(other["losses"]) == 10 and worst <= 1e-5, f"{what}: its checkpoint resumed as FSDP on 2, {worst:.3g} from one device")
    check(mixed > 0, f"gpt 4 --parallel auto: no budget between {least} and twice it chose a per-unit mix")


def cp(d):
    f = Files(d, "gpt")
    ref_save = os.path.join(d, "gpt-one.st")
    one = train_json(*f.args("gpt", "1", "--save", ref_save))
    if one is None:
        return
    # (mesh, dp mode, {dp, tp, cp}): every cp that divides the 16 positions, beside dp and tp,
    # the named form in any order
    cases = (("cp=1", "fsdp", (1, 1, 1)), ("cp=2", "fsdp", (1, 1, 2)), ("cp=4", "fsdp", (1, 1, 4)),
             ("cp=8", "fsdp", (1, 1, 8)), ("dp=2,cp=2", "fsdp", (2, 1, 2)), ("cp=2,dp=2", "ddp", (2, 1, 2)),
             ("tp=2,cp=4", "fsdp", (1, 2, 4)), ("dp=2,tp=2,cp=2", "fsdp", (2, 2, 2)),
             ("tp=2,cp=2,dp=2", "ddp", (2, 2, 2)), ("dp=4,tp=2", "fsdp", (4, 2, 1)), ("2x2", "fsdp", (2, 2, 1)))
    worst_loss = worst_param = 0.0
    gathered = {}
    for mesh, dp, (D, T, C) in cases:
        save = os.path.join(d, f"gpt-{mesh}-{dp}.st")
        r = train_json(*f.args("gpt", mesh, "--dp", dp, "--save", save))
        if r is None:
            continue
        what = f"gpt on {mesh} ({dp})"
        check(r["mesh"] == mesh and r["parallel"] == {"dp": D, "tp": T, "cp": C} and list(r)[-1] == "parallel",
              f"{what}: JSON mesh {r['mesh']!r}, parallel {r.get('parallel')}, last field {list(r)[-1]}")
        worst_loss = max(worst_loss, against_one(r, one, what))
        worst_param = max(worst_param, close_params(save, ref_save, what))
        c = r["collectives_per_step"]
        if C > 1:  # K and V gathered (each block, forward and backward), dK and dV reduce-scattered
            check(c["all_gather"] >= 2 * 2 * 2 and c["reduce_scatter"] >= 2, f"{what}: collectives {c}")
            gathered[mesh] = c["all_gather"]
    print(f"gpt with cp: worst loss difference {worst_loss:.3g} (relative), worst parameter difference {worst_param:.3g}")
    # the ring: K/V passed around, not gathered (the 8 K/V gathers of the 2 blocks are gone)
    worst_loss = worst_param = 0.0
    for mesh in ("cp=2", "cp=4", "cp=8", "dp=2,cp=2", "tp=2,cp=4"):
        save = os.path.join(d, f"gpt-{mesh}-ring.st")
        r = train_json(*f.args("gpt", mesh, "--cp-method", "ring", "--save", save))
        if r is None:
            continue
        what = f"gpt on {mesh} (ring)"
        worst_loss = max(worst_loss, against_one(r, one, what))
        worst_param = max(worst_param, close_params(save, ref_save, what))
        c = r["collectives_per_step"]
        check(mesh not in gathered or c["all_gather"] == gathered[mesh] - 8, f"{what}: collectives {c}")
    print(f"gpt with cp, the ring: worst loss difference {worst_loss:.3g} (relative), worst parameter difference {worst_param:.3g}")
    # misuse: exit 2, naming the numbers
    for mesh, said in (("cp=3", "context parallel over 3 does not divide the 16 positions"),
                       ("cp=32", "context parallel over 32 does not divide the 16 positions"),
                       ("dp=2,cp=5", "context parallel over 5 does not divide"),
                       ("dp=2,dp=2", "dp is given twice"), ("xp=2", "'xp=2' names no mesh dim"),
                       ("cp=0", "cp needs a size from 1"), ("cp=", "cp needs a size from 1"),
                       ("dp=2,,cp=2", "'' names no mesh dim"), ("tp=3,cp=2", "tensor parallel over 3 does not divide")):
        p, cmd = run(*f.args("gpt", mesh))
        check(p.returncode == 2 and said in p.stderr and not p.stdout, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run(*f.args("gpt", "cp=2", "--parallel", "auto"))
    check(p.returncode == 2 and "cp = 1" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run(*f.args("gpt", "cp=2", "--cp-method", "spiral"))
    check(p.returncode == 2 and "--cp-method spiral: choose one of all_gather, ring" in p.stderr,
          f"{cmd}: exit {p.returncode}\n{p.stderr}")
    g = Files(d, "mlp")
    p, cmd = run(*g.args("mlp", "dp=2,cp=2"))
    check(p.returncode == 2 and "the mlp has none (cp must be 1)" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run(*g.args("mlp", "2", "--cp-method", "ring"))
    check(p.returncode == 2 and "the mlp has no attention" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")


def bubble_of(schedule, p, v, m):
    """The table's bubble for the shapes whose formula is published (None: not checked here)."""
    if schedule in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if schedule == "interleaved" and m % p == 0:
        return (p - 1) / (v * m + p - 1)
    if schedule == "zb" and m >= p:
        return (p - 1) / (3 * m + p - 1)
    return None


def pp(d):
    f = Files(d, "gpt")
    ref_save = os.path.join(d, "gpt-one.st")
    one = train_json(*f.args("gpt", "1", "--save", ref_save))
    if one is None:
        return
    # every schedule on 1, 2 and 4 pipeline ranks (interleaved: 4/P stages each), 1, 2, 4 and 8
    # microbatches (fewer than the stages included); then beside dp (FSDP, DDP), tp and cp
    cases = [(f"pp={p}", "fsdp", s, m) for s in ("gpipe", "1f1b", "interleaved", "zb") for p in (1, 2, 4)
             for m in (1, 2, 4, 8)]
    cases += [("dp=2,pp=2", "fsdp", "1f1b", 4), ("pp=2,dp=2", "ddp", "zb", 2), ("tp=2,pp=2", "fsdp", "interleaved", 2),
              ("cp=2,pp=2", "fsdp", "gpipe", 4), ("dp=2,tp=2,pp=2", "fsdp", "1f1b", 8), ("pp=4,dp=2", "ddp", "1f1b", 1)]
    worst_loss = worst_param = 0.0
    for mesh, dp, schedule, m in cases:
        save = os.path.join(d, f"gpt-{mesh}-{schedule}-{m}.st")
        r = train_json(*f.args("gpt", mesh, "--dp", dp, "--schedule", schedule, "--microbatches", m, "--save", save))
        if r is None:
            continue
        what = f"gpt on {mesh} ({dp}, {schedule}, {m} microbatches)"
        P = r["parallel"].get("pp")
        want_p = int(dict(x.split("=") for x in mesh.split(","))["pp"])
        sc = r.get("schedule") or {}
        v = 4 // want_p if schedule == "interleaved" else 1
        check(P == want_p and list(r)[-2:] == ["parallel", "schedule"] and
              list(sc) == ["name", "stages", "virtual", "microbatches", "slots", "bubble"] and sc["name"] == schedule and
              sc["stages"] == want_p and sc["virtual"] == v and sc["microbatches"] == m,
              f"{what}: JSON parallel {r.get('parallel')}, schedule {sc}, fields {list(r)[-2:]}")
        b = bubble_of(schedule, want_p, v, m)
        check(b is None or abs(sc.get("bubble", -1) - b) < 1e-8, f"{what}: bubble {sc.get('bubble')}, the formula's {b}")
        worst_loss = max(worst_loss, against_one(r, one, what))
        worst_param = max(worst_param, close_params(save, ref_save, what))
    print(f"gpt with pp: {len(cases)} runs, worst loss difference {worst_loss:.3g} (relative), "
          f"worst parameter difference {worst_param:.3g}")
    # The training state, in the whole gpt's files: a pipeline's checkpoint resumed by the same
    # pipeline bit for bit, by other schedules and pp and without a pipeline as one device
    # trains; a checkpoint written without a pipeline resumed by one; resuming past --steps.
    ck, flat_ck = os.path.join(d, "gpt-pp-ck.st"), os.path.join(d, "gpt-flat-ck.st")
    base = ["--schedule", "1f1b", "--microbatches", 4]
    full = train_json(*f.args("gpt", "pp=2", *base, "--checkpoint", ck, "--checkpoint-at", 10))
    flat = train_json(*f.args("gpt", "2x2", "--checkpoint", flat_ck, "--checkpoint-at", 10))
    if full and flat:
        same = train_json(*f.args("gpt", "pp=2", *base, "--resume", ck))
        check(same is not None and same["losses"] == full["losses"][10:],
              "gpt pp=2 1f1b resumed by itself: not the uninterrupted run's losses bit for bit")
        for mesh, more, from_ck in (("pp=4", ["--schedule", "zb", "--microbatches", 2], ck),
                                    ("dp=2,pp=2", ["--schedule", "interleaved", "--microbatches", 8], ck),
                                    ("2x2", [], ck), ("1", [], ck),
                                    ("pp=4", ["--schedule", "gpipe", "--microbatches", 2], flat_ck)):
            r = train_json(*f.args("gpt", mesh, *more, "--resume", from_ck))
            what = f"gpt {mesh} {' '.join(map(str, more))} resumed from {os.path.basename(from_ck)}"
            if r:
                check(len(r["losses"]) == 10, f"{what}: {len(r['losses'])} losses (10 expected)")
                worst = max(rel(a, b) for a, b in zip(r["losses"], one["losses"][10:]))
                check(worst <= 1e-5, f"{what}: a loss {worst:.3g} (relative) from one device's")
        p, cmd = run("--model", "gpt", "--mesh", "pp=2", "--init", f.init, "--data", f.data, "--steps", 5, "--resume", ck)
        check(p.returncode == 2 and "the checkpoint is at step 10, past --steps 5" in p.stderr,
              f"{cmd}: exit {p.returncode}\n{p.stderr}")
    # a run without a pipeline keeps its JSON: "parallel" {dp, tp, cp} last, no "schedule"
    r = train_json(*f.args("gpt", "dp=2"))
    if r:
        check(list(r)[-1] == "parallel" and r["parallel"] == {"dp": 2, "tp": 1, "cp": 1} and "schedule" not in r,
              f"gpt dp=2 without a pipeline: JSON ends {list(r)[-2:]}, parallel {r['parallel']}")
    # misuse: exit 2, naming the numbers
    for more, said in ((["--mesh", "pp=3"], "cannot be cut into 3 equal pipeline stages"),
                       (["--mesh", "pp=8"], "cannot be cut into 8 equal pipeline stages"),
                       (["--mesh", "pp=2", "--microbatches", "3"], "--microbatches 3 does not divide the gpt's batch of 8"),
                       (["--mesh", "pp=2", "--microbatches", "16"], "--microbatches 16 does not divide"),
                       (["--mesh", "pp=2", "--microbatches", "0"], "--microbatches 0 does not divide"),
                       (["--mesh", "pp=2", "--schedule", "pipedream"], "--schedule pipedream: choose one of"),
                       (["--mesh", "pp=0"], "pp needs a size from 1"),
                       (["--mesh", "pp=2", "--dtype", "bf16"], "pipeline parallelism trains in f32"),
                       (["--mesh", "pp=2", "--parallel", "auto"], "without pipeline parallelism (pp = 1)")):
        p, cmd = run("--model", "gpt", "--init", f.init, "--data", f.data, "--steps", 2, *more)
        check(p.returncode == 2 and said in p.stderr and not p.stdout, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    g = Files(d, "mlp")
    p, cmd = run(*g.args("mlp", "dp=2,pp=2"))
    check(p.returncode == 2 and "the mlp is not cut" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")


def mpi(d):
    # (model, mesh, dp mode, processes); mesh None: --mesh left out, the world size's 1-d mesh.
    cases = (("gpt", "2x4", "fsdp", 8), ("mlp", "4x2", "ddp", 8), ("gpt", None, "fsdp", 6), ("mlp", "2x3", "fsdp", 6),
             ("gpt", "3x2", "ddp", 6), ("gpt", "5x1", "fsdp", 5), ("mlp", "16", "ddp", 16),
             ("gpt", "dp=2,cp=2", "fsdp", 4), ("gpt", "cp=2", "ddp", 2), ("gpt", "tp=2,cp=4", "fsdp", 8),
             ("gpt", "dp=2,cp=2", "fsdp", 4, "--cp-method", "ring"))
    files = {m: Files(d, m) for m in ("mlp", "gpt")}
    for model, mesh, dp, n, *more in cases:
        f = files[model]
        what = f"{model} {mesh or f'(world {n})'} {dp} {' '.join(more)}"
        a, b = os.path.join(d, model + "-sim.st"), os.path.join(d, model + "-mpi.st")
        sim = train_json(*f.args(model, mesh or str(n), "--dp", dp, "--save", a, *more))
        par_args = f.args(model, mesh or str(n), "--dp", dp, "--save", b, "--backend", "mpi", *more)
        if mesh is None:
            par_args = [x for i, x in enumerate(par_args) if x != "--mesh" and (i == 0 or par_args[i - 1] != "--mesh")]
        par = train_json(*par_args, mpi=n)
        if sim and par:
            check(sim["losses"] == par["losses"] and sim["grad_norms"] == par["grad_norms"],
                  f"{what}: MPI losses differ from the simulation's")
            check(par["collectives_per_step"] == sim["collectives_per_step"],
                  f"{what}: collectives {par['collectives_per_step']} against {sim['collectives_per_step']}")
            check(par["mesh"] == (mesh or str(n)), f"{what}: the JSON's mesh is {par['mesh']!r}")
            with open(a, "rb") as x, open(b, "rb") as y:
                check(x.read() == y.read(), f"{what}: the --save files differ")
    # Shuffled epochs (20 steps over 5 batches): each process reads its ranks' rows, the same bits.
    g = Files(d, "gpt", steps=5)
    sim = train_json(*g.args("gpt", "2x2", "--shuffle", "9"))
    par = train_json(*g.args("gpt", "2x2", "--shuffle", "9", "--backend", "mpi"), mpi=4)
    if sim and par:
        check(sim["losses"] == par["losses"] and sim["grad_norms"] == par["grad_norms"] and par["epoch"] == 3,
              f"--shuffle 9 over 4 epochs: MPI differs from the simulation (epoch {par['epoch']})")
    # --parallel auto: the same choice and the same bits on every process as in the simulation
    for model, mesh, n, cost in (("mlp", "2x2", 4, None), ("gpt", "2", 2, None), ("gpt", "2x2", 4, [2, 2])):
        f = files[model]
        more = ["--parallel", "auto"] + (["--cost", cost_file(d, "free.json", cost, 1e-12, 1e-15)] if cost else [])
        sim = train_json(*f.args(model, mesh, *more))
        par = train_json(*f.args(model, mesh, *more, "--backend", "mpi"), mpi=n)
        if sim and par:
            check(sim["losses"] == par["losses"] and sim["dp"] == par["dp"] and
                  sim["collectives_per_step"] == par["collectives_per_step"],
                  f"{model} {mesh} --parallel auto: MPI ({par['dp']}) differs from the simulation ({sim['dp']})")
    # a per-unit mix of FSDP and DDP (the gpt's model DDP, its blocks FSDP or DDP): the same bits, the same file
    f = files["gpt"]
    a, b = os.path.join(d, "mix-sim.st"), os.path.join(d, "mix-mpi.st")
    more = ["--parallel", "auto", "--memory", "1000000", "--clip", "0.5"]
    sim = train_json(*f.args("gpt", "2x2", *more, "--save", a))
    par = train_json(*f.args("gpt", "2x2", *more, "--save", b, "--backend", "mpi"), mpi=4)
    if sim and par:
        check(sim["dp"] == "per-unit" and par["dp"] == "per-unit" and sim["auto"]["units"] == par["auto"]["units"] and
              sim["losses"] == par["losses"] and sim["grad_norms"] == par["grad_norms"] and
              sim["collectives_per_step"] == par["collectives_per_step"],
              f"gpt 2x2 {' '.join(more)}: MPI ({par['dp']}) differs from the simulation ({sim['dp']})")
        with open(a, "rb") as x, open(b, "rb") as y:
            check(x.read() == y.read(), "gpt 2x2 per-unit: the --save files differ")
    # pipelines: one group of processes per pipeline rank; the same bits as the simulation, and
    # the same --save and --checkpoint files (the groups write one file together); the
    # checkpoint resumed under MPI continues the simulation's run bit for bit
    f = files["gpt"]
    for mesh, n, schedule, m in (("pp=2", 2, "1f1b", 4), ("pp=4", 4, "zb", 2), ("dp=2,pp=2", 4, "interleaved", 2),
                                 ("tp=2,pp=2", 4, "gpipe", 8)):
        more = ["--schedule", schedule, "--microbatches", m]
        out = {k: os.path.join(d, f"pp-{k}.st") for k in ("sim-save", "sim-ck", "mpi-save", "mpi-ck")}
        sim = train_json(*f.args("gpt", mesh, *more, "--save", out["sim-save"], "--checkpoint", out["sim-ck"],
                                 "--checkpoint-at", 10))
        par = train_json(*f.args("gpt", mesh, *more, "--backend", "mpi", "--save", out["mpi-save"], "--checkpoint",
                                 out["mpi-ck"], "--checkpoint-at", 10), mpi=n)
        what = f"gpt {mesh} {' '.join(map(str, more))}"
        if sim and par:
            check(sim["losses"] == par["losses"] and sim["grad_norms"] == par["grad_norms"] and
                  sim["collectives_per_step"] == par["collectives_per_step"] and
                  sim["bytes_per_rank"] == par["bytes_per_rank"] and sim["schedule"] == par["schedule"],
                  f"{what}: MPI differs from the simulation")
            for k in ("save", "ck"):
                with open(out["sim-" + k], "rb") as x, open(out["mpi-" + k], "rb") as y:
                    check(x.read() == y.read(), f"{what}: the --{'save' if k == 'save' else 'checkpoint'} files differ")
            if mesh in ("pp=2", "dp=2,pp=2"):
                res = train_json(*f.args("gpt", mesh, *more, "--backend", "mpi", "--resume", out["mpi-ck"]), mpi=n)
                check(res is not None and res["losses"] == sim["losses"][10:],
                      f"{what}: its MPI checkpoint resumed under MPI is not the simulation's run bit for bit")
    # a checkpoint that lacks a tensor of the second group's: that group fails, the job ends
    # naming it (no hang in the pipeline's first exchange)
    broken = os.path.join(d, "pp-broken.st")
    without(os.path.join(d, "pp-mpi-ck.st"), "blocks.1.mlp.w2.exp_avg", broken)
    p, cmd = run(*f.args("gpt", "pp=2", "--backend", "mpi", "--resume", broken), mpi=2)
    check(p.returncode != 0 and "no tensor 'blocks.1.mlp.w2.exp_avg'" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run(*f.args("gpt", "pp=2", "--backend", "mpi"), mpi=4)
    check(p.returncode == 2 and "needs 2 processes" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    f = files["mlp"]
    p, cmd = run(*f.args("mlp", "2x4", "--backend", "mpi"), mpi=4)
    check(p.returncode == 2 and "needs 8 processes" in p.stderr, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    # Refused on every process (SGD's checkpoint, an AdamW run): one line from the first,
    # exit 2, no MPI_ABORT banner.
    ck = os.path.join(d, "sgd-ck.st")
    p, cmd = run(*f.args("mlp", "2x4", "--optimizer", "sgd", "--checkpoint", ck, "--checkpoint-at", "2"))
    check(p.returncode == 0, f"{cmd}: exit {p.returncode}\n{p.stderr}")
    p, cmd = run(*f.args("mlp", "2x4", "--backend", "mpi", "--resume", ck), mpi=8)
    said = [l for l in p.stderr.splitlines() if "sgd" in l]
    check(p.returncode == 2 and len(said) == 1 and said[0].startswith("spmd-train: ") and "MPI_ABORT" not in p.stderr,
          f"{cmd}: exit {p.returncode}, {len(said)} lines name the optimizer\n{p.stderr}")


def main():
    with tempfile.TemporaryDirectory() as d:
        {"curves": curves, "resume": resume, "options": options, "errors": errors, "auto": auto, "cp": cp,
         "pp": pp, "mpi": mpi}[GROUP](d)
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    print(f"spmd-train {GROUP}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
