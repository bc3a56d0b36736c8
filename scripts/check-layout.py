#!/usr/bin/env python3
"""Checks the layout rules of ctrack's crates (run by .ci/run).

usage: scripts/check-layout.py [ROOT]

- No source file over 800 lines and no function over 120 lines
  (`#[cfg(test)] mod ... { }` blocks count for neither).
- No import circle: within each crate, the modules a file names
  (`crate::a::b`, `super::x`, `self::x`) form a graph with no cycle, both
  between files and between the crate's top-level modules (folders).
  Edges from a folder's `mod.rs` to its own children (declaring and
  re-exporting them) do not count; a child naming its `mod.rs` does.
  Test modules are left out.

Prints each offence; exits 1 if there is any.
"""
import pathlib
import re
import sys

FILE_MAX, FN_MAX = 800, 120


def strip(line, state):
    """The line without comments, string and char literals."""
    out, i, n = [], 0, len(line)
    while i < n:
        if state["block"]:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out)
            state["block"] = False
            i = j + 2
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["block"] = True
            i += 2
            continue
        m = re.match(r'r(#*)"', line[i:]) if c == "r" and (i == 0 or not line[i - 1].isalnum()) else None
        if m:
            end = '"' + m.group(1)
            j = line.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
            continue
        if c == '"':
            j = i + 1
            while j < n and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            out.append('""')
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                out.append("' '")
                continue
        out.append(c)
        i += 1
    return "".join(out)


def code_lines(path):
    """Cleaned lines, with test modules blanked out; and the count kept."""
    lines = path.read_text(errors="replace").split("\n")
    state = {"block": False}
    clean = [strip(l, state) for l in lines]
    i, kept = 0, len(lines)
    while i < len(clean):
        if re.match(r"^\s*#\[cfg\(test\)\]", clean[i]):
            k = i + 1
            while k < len(clean) and clean[k].strip() == "":
                k += 1
            if k < len(clean) and re.match(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", clean[k]):
                d, j = 0, k
                while j < len(clean):
                    d += clean[j].count("{") - clean[j].count("}")
                    if d <= 0:
                        break
                    j += 1
                for x in range(i, min(j + 1, len(clean))):
                    clean[x] = ""
                kept -= j - i + 1
                i = j + 1
                continue
        i += 1
    return clean, kept


FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")


def functions(clean):
    for i, l in enumerate(clean):
        m = FN.match(l)
        if not m:
            continue
        d, opened = 0, False
        for j in range(i, len(clean)):
            if not opened and ";" in clean[j] and "{" not in clean[j]:
                break
            d += clean[j].count("{") - clean[j].count("}")
            opened = opened or "{" in clean[j]
            if opened and d <= 0:
                yield m.group(7), i + 1, j - i + 1
                break


def module_of(src, path):
    """The module path of a file: ['track', 'open'] for src/track/open.rs."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def resolve(mods, base):
    """The longest prefix of `base` that names a module file."""
    for k in range(len(base), 0, -1):
        if tuple(base[:k]) in mods:
            return tuple(base[:k])
    return None


def imports(clean, me, is_dir_mod, mods):
    """Modules named by a file: crate::, super::, self:: paths (use lists
    expanded one level)."""
    text = "\n".join(clean)
    out = set()
    parent = me if is_dir_mod else me[:-1]
    own = me if is_dir_mod else me  # `self::` means this module
    for m in re.finditer(r"\b(crate|super|self)((?:::\w+)+)(::\{([^}]*)\})?", text):
        head, rest, group = m.group(1), m.group(2), m.group(4)
        segs = [s for s in rest.split("::") if s]
        if head == "crate":
            base = []
        elif head == "self":
            base = list(own)
        else:
            base = list(parent)
            while segs and segs[0] == "super":
                segs.pop(0)
                base = base[:-1]
            base = base[:-1] if False else base
            # `super` from a file is its folder's module; from a mod.rs, the parent folder's.
            if is_dir_mod:
                base = list(me[:-1])
        paths = [base + segs]
        if group:
            for item in group.split(","):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    paths.append(base + segs + [p for p in item.split("::") if p])
        for p in paths:
            r = resolve(mods, p)
            if r is not None and r != tuple(me):
                out.add(r)
    return out


def cycles(graph):
    """Strongly connected components with more than one node."""
    index, low, stack, on, res, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                res.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return res


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = 0
    for crate in sorted((root / "crates").iterdir()):
        src = crate / "src"
        if not src.is_dir():
            continue
        files = sorted(src.rglob("*.rs"))
        mods = {}
        parsed = {}
        for f in files:
            clean, kept = code_lines(f)
            parsed[f] = clean
            mods[tuple(module_of(src, f))] = f
            rel = f.relative_to(root)
            if kept > FILE_MAX:
                print(f"file {kept} lines (max {FILE_MAX}): {rel}")
                bad += 1
            for name, line, length in functions(clean):
                if length > FN_MAX:
                    print(f"fn {length} lines (max {FN_MAX}): {rel}:{line} {name}")
                    bad += 1
        # Modules declared `#[cfg(test)] mod name;` (test files) are left
        # out of the graph, as inline test modules are.
        test_mods = set()
        for f in files:
            me = tuple(module_of(src, f))
            lines = f.read_text(errors="replace").split("\n")
            for i, l in enumerate(lines[:-1]):
                if re.match(r"^\s*#\[cfg\(test\)\]", l):
                    m = re.match(r"^\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", lines[i + 1])
                    if m:
                        test_mods.add(me + (m.group(3),))
        file_graph, top_graph = {}, {}
        for f in files:
            me = tuple(module_of(src, f))
            if any(me[: len(t)] == t for t in test_mods):
                continue
            is_dir_mod = f.name in ("mod.rs", "lib.rs", "main.rs")
            for t in imports(parsed[f], list(me), is_dir_mod, mods):
                # A folder's mod.rs declaring or re-exporting its children.
                if is_dir_mod and t[: len(me)] == me:
                    continue
                file_graph.setdefault(me, set()).add(t)
                if me and t and me[0] != t[0]:
                    top_graph.setdefault(me[0], set()).add(t[0])
        for kind, g in (("files", file_graph), ("folders", top_graph)):
            for comp in cycles(g):
                names = [("::".join(c) if isinstance(c, tuple) else c) or "crate" for c in comp]
                print(f"import circle between {kind} of {crate.name}: {' <-> '.join(names)}")
                bad += 1
    print(f"layout: {bad} offence(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
