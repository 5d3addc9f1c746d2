#!/usr/bin/env python3
"""Compile one test case and check the result.

usage: run_case.py CASE.cpp -- COMPILER [FLAGS...]

The first line of CASE.cpp says what must happen:
  // expect: SENTENCE    compilation must fail, with SENTENCE in the compiler's output
  // expect-also: TEXT   (second line, optional) TEXT must appear in the output as well
  // expect-success      compilation must succeed (a control: proves the flags and the
                         include path work, so a failure elsewhere is the expected one)
SENTENCE must appear in a diagnostic line ("error:"), not just in an echoed source line;
whitespace is collapsed before matching.
Only the syntax and semantic checks run (-fsyntax-only): static_asserts fire, nothing is
written.
"""
import re
import subprocess
import sys


def main(argv):
    if len(argv) < 4 or argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    case, compiler = argv[1], argv[3:]
    with open(case, encoding="utf-8") as f:
        first = f.readline().strip()
        second = f.readline().strip()
    # "// expect-also: TEXT" on the second line: TEXT must appear anywhere in the output too
    # (a name the compiler prints in the instantiation notes, say).
    also = re.fullmatch(r"//\s*expect-also:\s*(.+)", second)

    m = re.fullmatch(r"//\s*expect:\s*(.+)", first)
    expect_success = re.fullmatch(r"//\s*expect-success\s*", first) is not None
    if not m and not expect_success:
        print(f"{case}: the first line must be '// expect: SENTENCE' or '// expect-success'",
              file=sys.stderr)
        return 2

    cmd = compiler + ["-fsyntax-only", case]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"could not run the compiler: {e}", file=sys.stderr)
        return 2
    output = proc.stdout
    print("$ " + " ".join(cmd))

    if expect_success:
        if proc.returncode == 0:
            print("PASS: compiled, as expected")
            return 0
        print(output)
        print("FAIL: the control case does not compile (check the compiler, flags and include path)")
        return 1

    expected = " ".join(m.group(1).split())
    if proc.returncode == 0:
        print(f"FAIL: compiled, but should fail with: {expected}")
        return 1
    diagnostics = [" ".join(line.split()) for line in output.splitlines() if "error:" in line]
    if not any(expected in line for line in diagnostics):
        print(output)
        print(f"FAIL: compilation failed, but no error says: {expected}")
        return 1
    if also and " ".join(also.group(1).split()) not in " ".join(output.split()):
        print(output)
        print(f"FAIL: the output does not mention: {also.group(1)}")
        return 1
    print(f"PASS: failed to compile with: {expected}" + (f" (and mentions {also.group(1)})" if also else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
