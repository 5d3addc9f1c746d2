#!/usr/bin/env python3
"""spmd as others consume it: a Meson subproject, and an installed spmd.pc.

usage: check_packaging.py <spmd-source-root> <c++ compiler>

1. A throw-away project with subprojects/spmd -> the source tree calls
   dependency('spmd') and compiles a file that static_asserts a layout.
2. `meson install --destdir` of a fresh spmd build, then the same file compiled with
   the flags `pkg-config --cflags spmd` gives for the installed tree; and so is
   examples/own_model/own_model.cpp (a model of spmd::nn's modules trained on 2x2 against one
   device), which must run and pass.
"""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

CONSUMER = """#include <spmd/spmd.hpp>
using L = spmd::layout<spmd::mesh<2, 2>, spmd::placements<spmd::shard<0>, spmd::replicate>,
                       spmd::extents<5, 3>>;
static_assert(L{}.local_shape(2) == spmd::dims<2>{2, 3});
int main() { return L{}.local_shape(0)[0] == 3 ? 0 : 1; }
"""


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def main():
    source, cxx = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # 1. subproject
        proj = tmp / "consumer"
        (proj / "subprojects").mkdir(parents=True)
        os.symlink(source, proj / "subprojects" / "spmd")
        (proj / "main.cpp").write_text(CONSUMER)
        (proj / "meson.build").write_text(
            "project('consumer', 'cpp', default_options : ['cpp_std=c++20'])\n"
            "spmd_dep = dependency('spmd', fallback : ['spmd', 'spmd_dep'])\n"
            "test('consumer', executable('consumer', 'main.cpp', dependencies : spmd_dep))\n")
        opts = ["-Dspmd:tests=false", "-Dspmd:cuda=disabled"]
        run(["meson", "setup", proj / "b", proj] + opts, env={**os.environ, "CXX": cxx})
        run(["meson", "test", "-C", proj / "b"])
        print("PASS: spmd as a Meson subproject (dependency('spmd'))")

        # 2. install + pkg-config
        build, dest = tmp / "spmd-build", tmp / "dest"
        run(["meson", "setup", build, source, "--prefix", "/usr", "-Dtests=false", "-Dcuda=disabled"],
            env={**os.environ, "CXX": cxx})
        run(["meson", "install", "-C", build, "--destdir", dest, "--quiet", "--no-rebuild",
             "--tags", "devel"])
        pc_dir = dest / "usr" / "share" / "pkgconfig"
        if not (pc_dir / "spmd.pc").is_file():
            sys.exit(f"FAIL: no spmd.pc under {pc_dir}")
        if not (dest / "usr" / "include" / "spmd" / "spmd.hpp").is_file():
            sys.exit("FAIL: headers not installed under include/spmd")
        env = {**os.environ, "PKG_CONFIG_PATH": str(pc_dir), "PKG_CONFIG_SYSROOT_DIR": str(dest)}
        cflags = run(["pkg-config", "--cflags", "spmd"], env=env).split()
        libs = run(["pkg-config", "--libs", "spmd"], env=env).split()
        if "-pthread" not in cflags or "-pthread" not in libs:
            sys.exit(f"FAIL: spmd.pc must ask for POSIX threads (cflags: {cflags}, libs: {libs})")
        run([cxx] + cflags + [str(proj / "main.cpp"), "-o", str(tmp / "pc_consumer")] + libs)
        run([str(tmp / "pc_consumer")])
        print(f"PASS: installed headers + spmd.pc (cflags: {' '.join(cflags)}; libs: {' '.join(libs)})")
        # Your own model, out of the tree: only the installed headers and what spmd.pc gives.
        own = source / "examples" / "own_model" / "own_model.cpp"
        run([cxx] + cflags + [str(own), "-o", str(tmp / "own_model")] + libs)
        print("PASS: examples/own_model against the installed headers: " + run([str(tmp / "own_model")]).strip())
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
