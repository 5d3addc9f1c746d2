#!/usr/bin/env python3
"""The layers include only the layers below them (docs/design.md, "Layers").

usage: check_layers.py INCLUDE_DIR

Reads every `#include "spmd/..."` under INCLUDE_DIR/spmd and fails, naming the file, the line
and the layer it reaches, when a header includes a layer its own may not use: core, plan,
random, ops, host storage, runtime, backends (each backend only its own folder and the
backends it is built on), io. Nothing below the backends names one, and no backend reaches
into another it is not built on.
"""
import pathlib
import re
import sys

BELOW_RUNTIME = {"core", "plan", "random", "ops", "host"}
ALLOWED = {
    "core": {"core"},
    "plan": {"core", "plan"},
    "random": {"core", "random"},
    "ops": {"core", "plan", "ops"},
    "host": {"core", "plan", "random", "host"},
    "runtime": BELOW_RUNTIME | {"runtime"},
    # io is host-only and backend-agnostic: any layer but the backends.
    "io": BELOW_RUNTIME | {"runtime", "io", "autoshard"},
    # autoshard: the sharding search, over the plans and the operators' rules (no runtime).
    "autoshard": {"core", "plan", "ops", "autoshard"},
    # nn: models and their parallelisation, over the runtime (backend-agnostic too).
    "nn": BELOW_RUNTIME | {"runtime", "nn", "autoshard"},
}
# Each backend: its own folder and those it is built on.
BACKENDS = {
    "sim": set(),
    "process": set(),
    "mpi": {"process"},
    "cuda": set(),
    "nccl": {"cuda", "mpi", "process"},
}
# Umbrella and forwarding headers that exist to include everything (or a backend).
UMBRELLAS = {"spmd/spmd.hpp", "spmd/plan.hpp", "spmd/sim/sim.hpp"}

root = pathlib.Path(sys.argv[1])
include = re.compile(r'^\s*#\s*include\s+"(spmd/[^"]+)"')
bad = []
checked = 0


def layer_of(path):
    """("backends", "cuda") for spmd/backends/cuda/..., ("core", None) for spmd/core/..."""
    parts = path.split("/")
    if len(parts) < 3:
        return None, None
    if parts[1] == "backends":
        return "backends", parts[2] if len(parts) > 3 else None
    return parts[1], None


for p in sorted(root.rglob("*.hpp")):
    rel = p.relative_to(root).as_posix()
    if rel in UMBRELLAS:
        continue
    me, my_backend = layer_of(rel)
    for n, line in enumerate(p.read_text().splitlines(), 1):
        m = include.match(line)
        if not m:
            continue
        checked += 1
        target, backend = layer_of(m.group(1))
        if me == "backends":
            ok = (target in BELOW_RUNTIME | {"runtime"} or
                  (target == "backends" and (backend == my_backend or backend in BACKENDS.get(my_backend, ()))))
        elif me in ALLOWED:
            ok = target in ALLOWED[me]
        else:
            bad.append(f"{rel}: folder spmd/{me}/ is not a layer check_layers.py knows (add it to ALLOWED)")
            break
        if not ok:
            where = f"spmd/backends/{backend}/" if target == "backends" else f"spmd/{target}/"
            bad.append(f"{rel}:{n}: the {me}{'/' + my_backend if my_backend else ''} layer includes "
                       f"{m.group(1)} ({where} is not below it)")

for b in bad:
    print("FAIL:", b)
print(f"{checked} includes checked, {len(bad)} reach above their layer")
sys.exit(1 if bad else 0)
