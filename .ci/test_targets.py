#!/usr/bin/env python3
"""Print the ninja targets (paths relative to the build folder) that the named meson tests need:
each test's `depends` and any target's output in its command. Exit 2 naming a test that does not
exist, so that a renamed test cannot drop out of the sanitizer run unnoticed.

usage: test_targets.py BUILD_DIR TEST_NAME...
"""
import json
import os
import subprocess
import sys

build = sys.argv[1]
wanted = sys.argv[2:]
root = os.path.realpath(build)
tests = json.loads(subprocess.run(["meson", "introspect", build, "--tests"], capture_output=True,
                                  text=True, check=True).stdout)
targets = json.loads(subprocess.run(["meson", "introspect", build, "--targets"], capture_output=True,
                                    text=True, check=True).stdout)
files = {t["id"]: t["filename"] for t in targets}
outputs = {os.path.realpath(f) for fs in files.values() for f in fs}
names = {t["name"] for t in tests}
missing = [w for w in wanted if w not in names]
if missing:
    print(f"test_targets.py: no test named {', '.join(missing)} in {build}", file=sys.stderr)
    sys.exit(2)
out = set()
for t in tests:
    if t["name"] not in wanted:
        continue
    for d in t["depends"]:
        out.update(files.get(d, []))
    out.update(c for c in t["cmd"] if os.path.realpath(c) in outputs)
print(" ".join(sorted(os.path.relpath(os.path.realpath(f), root) for f in out)))
