#!/usr/bin/env python3
"""Runs a command that needs a GPU; where it exits 2 saying there is no CUDA device (the
documented behaviour), prints that and exits 77 (meson: skipped). Otherwise its exit code.

usage: skip_without_gpu.py <command> [args...]
"""
import subprocess
import sys

r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stdout.write(r.stdout)
sys.stderr.write(r.stderr)
if r.returncode == 2 and "no CUDA device" in r.stderr:
    print("SKIP: no CUDA device; the command exited 2 with the message above")
    sys.exit(77)
sys.exit(r.returncode)
