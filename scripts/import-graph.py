#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The file-level import graph of the module's Rust (src/), and its cycles.

  scripts/import-graph.py [--edges] [SRC_DIR]

Each file is a module (src/kfd_preempt_main.rs the crate root; a.rs and
a/mod.rs the module a; #[path] attributes followed). A file imports another
when it names an item through `crate::` or `super::` paths (in `use`
declarations, grouped ones included, or inline) that resolves into the
other's module. Prints the cycles: groups of files that import each other,
directly or around a circle, leaving out a file and its own child module,
which Rust keeps together on purpose (binder's process.rs and its freeze
child). With --edges, every edge first. Exits 1 if there is a cycle.
"""

import os
import re
import sys

ROOT = "kfd_preempt_main.rs"
MOD_DECL = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', re.M)
PATH_ATTR_THEN_MOD = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def module_tree(src):
    """{module path tuple: file}, following mod declarations from the root."""
    mods = {(): os.path.join(src, ROOT)}
    todo = [()]
    while todo:
        m = todo.pop()
        f = mods[m]
        text = strip_comments(open(f, encoding="utf-8").read())
        base = os.path.dirname(f)
        own = os.path.splitext(os.path.basename(f))[0]
        child_dir = base if m == () or own == "mod" else os.path.join(base, own)
        paths = {name: p for p, name in PATH_ATTR_THEN_MOD.findall(text)}
        for name in MOD_DECL.findall(text):
            if name in paths:
                cand = [os.path.join(base, paths[name])]
            else:
                cand = [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")]
            for c in cand:
                if os.path.exists(c):
                    mods[m + (name,)] = os.path.normpath(c)
                    todo.append(m + (name,))
                    break
    return mods


def expand_use(tree):
    """'a::{b, c::{d, e}}' -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = tree.strip()
    i = tree.find("{")
    if i < 0:
        return [tree]
    prefix, inner = tree[:i], tree[i + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    return [x for p in parts if p.strip() for x in expand_use(prefix + p.strip())]


def references(text, here):
    """Module paths (tuples) a file's text names through crate:: or super::."""
    out = []
    for u in re.findall(r"\buse\s+([^;]+);", text):
        for p in expand_use(re.sub(r"\s+", "", u)):
            out.append(p)
    out += re.findall(r"(?<![\w:])((?:crate|super)(?:::\w+)+)", text)
    refs = []
    for p in out:
        segs = [s for s in re.sub(r"\bas\b.*$", "", p).split("::") if s and s != "self" and s != "*"]
        if not segs:
            continue
        if segs[0] == "crate":
            refs.append(tuple(segs[1:]))
        elif segs[0] == "super":
            m = list(here)
            while segs and segs[0] == "super":
                m = m[:-1]
                segs = segs[1:]
            refs.append(tuple(m) + tuple(segs))
    return refs


def graph(src):
    mods = module_tree(src)
    edges = {}
    for m, f in mods.items():
        text = strip_comments(open(f, encoding="utf-8").read())
        targets = set()
        for r in references(text, m):
            best = max((k for k in mods if r[:len(k)] == k), key=len, default=None)
            if best is not None and mods[best] != f:
                targets.add(mods[best])
        edges[f] = targets
    return mods, edges


def parent_child(mods, a, b):
    inv = {f: m for m, f in mods.items()}
    ma, mb = inv[a], inv[b]
    return ma == mb[:-1] or mb == ma[:-1]


def cycles(mods, edges):
    """Strongly connected components of more than one file, after
    removing the edges between a file and its own child."""
    e = {a: {b for b in bs if not parent_child(mods, a, b)} for a, bs in edges.items()}
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(e[v]):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(e):
        if v not in index:
            visit(v)
    return out


def main(argv):
    args = [a for a in argv[1:] if a != "--edges"]
    src = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    src = os.path.normpath(src)
    mods, edges = graph(src)
    rel = lambda f: os.path.relpath(f, os.path.dirname(src))
    if "--edges" in argv:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{rel(a)} -> {rel(b)}")
    found = cycles(mods, edges)
    for c in found:
        print("cycle: " + " <-> ".join(rel(f) for f in c))
    print(f"{len(mods)} files, {sum(len(b) for b in edges.values())} imports, {len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
