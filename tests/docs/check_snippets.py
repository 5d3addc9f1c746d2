#!/usr/bin/env python3
"""Docs quote code from marked regions of files the test suite builds; keep them equal.

usage: check_snippets.py <source-root> <markdown>...   check every snippet
       check_snippets.py <source-root> --update <markdown>...   rewrite the quoted blocks
       check_snippets.py --self-test

A region in a source file:      // [docs:name]  ...  // [/docs:name]
A quote in Markdown: the line   <!-- snippet: path/to/file.cpp#name -->
followed by a fenced code block, which must equal the region (common indent removed).
Fails, naming the doc line, when a file or region the docs name is missing, when a region
is opened twice or never closed, or when the quoted block differs from the region.
"""
import pathlib
import re
import sys
import tempfile
import textwrap

QUOTE = re.compile(r"^<!-- snippet: (\S+)#([\w-]+) -->\s*$")


def regions(path):
    """name -> text of every region in a source file."""
    found, open_at, lines = {}, {}, path.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"//\s*\[(/?)docs:([\w-]+)\]", line)
        if not m:
            continue
        closing, name = m.group(1) == "/", m.group(2)
        if not closing:
            if name in open_at or name in found:
                raise ValueError(f"{path}:{i + 1}: region '{name}' opened twice")
            open_at[name] = i
        else:
            if name not in open_at:
                raise ValueError(f"{path}:{i + 1}: region '{name}' closed but never opened")
            found[name] = textwrap.dedent("\n".join(lines[open_at.pop(name) + 1:i])).strip("\n")
    if open_at:
        raise ValueError(f"{path}: region(s) never closed: {', '.join(open_at)}")
    return found


def check(root, doc, update=False):
    errors, text = [], doc.read_text().splitlines()
    out, i = [], 0
    while i < len(text):
        line = text[i]
        out.append(line)
        m = QUOTE.match(line)
        i += 1
        if not m:
            continue
        where = f"{doc}:{i}"
        src = root / m.group(1)
        if not src.is_file():
            errors.append(f"{where}: names {m.group(1)}, which does not exist")
            continue
        try:
            region = regions(src).get(m.group(2))
        except ValueError as e:
            errors.append(f"{where}: {e}")
            continue
        if region is None:
            errors.append(f"{where}: names region '{m.group(2)}' of {m.group(1)}, which is missing")
            continue
        if i >= len(text) or not text[i].startswith("```"):
            errors.append(f"{where}: the snippet line must be followed by a fenced code block")
            continue
        fence = text[i]
        end = i + 1
        while end < len(text) and not text[end].startswith("```"):
            end += 1
        quoted = "\n".join(text[i + 1:end])
        if quoted != region:
            if update:
                out.extend([fence, *region.splitlines(), text[end] if end < len(text) else "```"])
                i = end + 1
                continue
            errors.append(f"{where}: the quoted block differs from region '{m.group(2)}' of {m.group(1)} "
                          f"(run check_snippets.py --update to copy it)")
    if update:
        doc.write_text("\n".join(out) + "\n")
    return errors


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        (root / "a.cpp").write_text("int x;\n  // [docs:r]\n  int y = 1;\n  // [/docs:r]\n")
        good = root / "good.md"
        good.write_text("<!-- snippet: a.cpp#r -->\n```cpp\nint y = 1;\n```\n")
        cases = {
            "missing region": "<!-- snippet: a.cpp#gone -->\n```cpp\nint y = 1;\n```\n",
            "missing file": "<!-- snippet: b.cpp#r -->\n```cpp\nint y = 1;\n```\n",
            "drifted block": "<!-- snippet: a.cpp#r -->\n```cpp\nint y = 2;\n```\n",
            "no block": "<!-- snippet: a.cpp#r -->\ntext\n",
        }
        assert check(root, good) == [], check(root, good)
        for name, body in cases.items():
            bad = root / "bad.md"
            bad.write_text(body)
            assert check(root, bad), f"self-test: a doc with a {name} passed"
        bad.write_text(cases["drifted block"])
        check(root, bad, update=True)
        assert check(root, bad) == [], "self-test: --update did not repair a drifted block"
    print("PASS: self-test (a missing region, file or block, and a drifted block all fail)")


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root, docs = pathlib.Path(argv[1]), argv[2:]
    update = "--update" in docs
    docs = [d for d in docs if d != "--update"]
    errors, quotes = [], 0
    for d in docs:
        path = root / d
        quotes += sum(1 for line in path.read_text().splitlines() if QUOTE.match(line))
        errors += check(root, path, update)
    if errors:
        print("\n".join(errors))
        sys.exit(1)
    print(f"PASS: {quotes} snippets in {len(docs)} docs match their regions")


if __name__ == "__main__":
    main(sys.argv)
