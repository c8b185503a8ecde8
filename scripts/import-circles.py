#!/usr/bin/env python3
"""Import circles among a crate's files: each file's `use` trees and inline paths
(`crate::…`, `super::…`, `self::…`, a child module's name) resolved to the file that
defines the module they name, then the strongly connected components of that graph
(Tarjan). A circle is a component of more than one file.

    scripts/import-circles.py [SRC [PREFIX]]   # default: rocsync-user/src, all files

PREFIX restricts the files looked at (e.g. `daemon/`). Prints each circle's files and
the edges inside it, then the count; exits 1 when there is any."""

import os
import re
import sys
from collections import defaultdict

SRC = sys.argv[1] if len(sys.argv) > 1 else "rocsync-user/src"
PREFIX = sys.argv[2] if len(sys.argv) > 2 else ""


def module_of(rel):
    """The module path (list) of a file relative to SRC."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def file_of(mod):
    """The file defining module path `mod`, or None."""
    if not mod:
        return "lib.rs"
    base = "/".join(mod)
    for cand in (base + ".rs", base + "/mod.rs"):
        if os.path.exists(os.path.join(SRC, cand)):
            return cand
    return None


REEXPORTS = {}  # file -> {name: (path, file it is resolved from)}


def resolve(path, here, seen=0):
    """The file a path (list of segments) names from the file `here`, longest prefix;
    through a module's `pub use` of another module (`pub use settings::config`)."""
    mod = module_of(here)
    first = path[0]
    if first == "crate":
        base, rest = [], path[1:]
    elif first in ("super", "self"):
        base = mod[:]
        rest = path
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    elif file_of(mod + [first]):
        base, rest = mod[:], path
    else:
        return None
    best = None
    for i in range(len(rest) + 1):
        f = file_of(base + rest[:i])
        if f:
            best = f
            continue
        alias = REEXPORTS.get(best, {}).get(rest[i - 1]) if i > 0 and best else None
        if alias and seen < 8:
            target, origin = alias
            f = resolve(target + rest[i:], origin, seen + 1)
            return f or best
        break
    if best and len(rest) > 0:
        alias = REEXPORTS.get(best, {}).get(rest[-1]) if best == file_of(base + rest) else None
    return best


def expand(tree):
    """`a::{b, c::{d, self}}` into its paths."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        p = tree.split(" as ")[0].strip()
        return [p] if p else []
    head, body = tree[:i], tree[i + 1 : tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    out = []
    for p in parts:
        for q in expand(p):
            out.append(head.rstrip(":") if q == "self" else head + q)
    return out


USE = re.compile(r"^([ \t]*)(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.M)
INLINE = re.compile(r"\b((?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+)")
# A path through a child module written inline (`seccomp::RETURN_CHECK` in `probes/mod.rs`):
# the same edge as `use seccomp::RETURN_CHECK`. Only a name that is a child module counts.
CHILD = re.compile(r"(?<![:\w])([a-z_][a-z0-9_]*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")


PUB_USE = re.compile(r"^pub(?:\([^)]*\))?\s+use\s+([^;]+);", re.M)


def strip(text):
    """The code without comments and without its `#[cfg(test)]` modules (at the end)."""
    code = re.sub(r"//[^\n]*", "", text)
    # A visibility (`pub(in crate::daemon)`) names a module, imports nothing.
    code = re.sub(r"\bpub\(in [^)]*\)", "pub", code)
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*mod \w+\s*\{", code, re.M)
    return code[: m.start()] if m else code


def reexports(rel, code):
    out = {}
    for tree in PUB_USE.findall(code):
        for p in expand(" ".join(tree.split())):
            name = p.split(" as ")[-1]
            segs = [s for s in p.split(" as ")[0].split("::") if s]
            if segs and segs[0] not in ("std", "core", "alloc") and name != "*":
                out[segs[-1] if " as " not in p else name] = (segs, rel)
    return out


def edges_of(rel, text):
    code = strip(text)
    out = set()
    for indent, tree in USE.findall(code):
        for p in expand(" ".join(tree.split())):
            segs = [s for s in p.split(" as ")[0].split("::") if s]
            if not segs or segs[0] in ("std", "core", "alloc"):
                continue
            # `use super::*` inside an inline module (a file's tests) is the file itself.
            if indent and segs[0] == "super":
                segs = ["self"] + segs[1:]
            f = resolve(segs, rel)
            if f and f != rel:
                out.add(f)
    inline = USE.sub("", code)
    for m in INLINE.finditer(inline):
        segs = m.group(1).split("::")
        f = resolve(segs, rel)
        if f and f != rel:
            out.add(f)
    for m in CHILD.finditer(inline):
        if m.group(1) in ("crate", "super", "self") or not file_of(module_of(rel) + [m.group(1)]):
            continue
        f = resolve([m.group(1)] + m.group(2).split("::")[1:], rel)
        if f and f != rel:
            out.add(f)
    return out


def main():
    graph = defaultdict(set)
    files = []
    for root, _, names in os.walk(SRC):
        for n in names:
            if n.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, n), SRC)
                files.append(rel)
    files = [f for f in files if not re.search(r"(^|/|_)tests\.rs$", f)]
    for rel in files:
        with open(os.path.join(SRC, rel)) as f:
            REEXPORTS[rel] = reexports(rel, strip(f.read()))
    for rel in files:
        if not rel.startswith(PREFIX):
            continue
        with open(os.path.join(SRC, rel)) as f:
            graph[rel] = {e for e in edges_of(rel, f.read()) if e.startswith(PREFIX)}
    index, low, stack, on, sccs = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
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
                sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    for comp in sccs:
        print(f"circle of {len(comp)} files:")
        for v in comp:
            inside = sorted(w for w in graph[v] if w in comp)
            print(f"  {v} -> {', '.join(inside)}")
    print(f"{len(sccs)} import circle(s)")
    sys.exit(1 if sccs else 0)


main()
