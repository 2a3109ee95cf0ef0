#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The file-level import graph of a Rust crate: its layers and cycles.

  scripts/import-graph.py [--edges] [--cycles-only] [SRC_DIR [LAYERS_FILE]]

Without arguments, the module (src/, layers in Documentation/design.rst).
Each file is a module (the crate root kfd_preempt_main.rs, lib.rs or
main.rs, the first SRC_DIR has; a.rs and a/mod.rs the module a; #[path]
attributes followed). Test code is left out: modules declared #[cfg(test)] or
#[kunit_tests(..)], inline or in their own file. A file imports another
when it names an item through `crate::` or `super::` paths (in `use`
declarations, grouped ones included, or inline) that resolves into the
other's module. Prints the cycles: groups of files that import each other,
directly or around a circle, leaving out a file and its own child module,
which Rust keeps together on purpose (binder's process.rs and its freeze
child). With --edges, every edge first.

The layers come from LAYERS_FILE: in an .rst file the literal block after
the heading "Layers", in an .rs file the ```text block after the doc
comment heading "# Layers". One layer a line from the top (lines indented
further continue the one before), each line's leading names ending in
".rs" (a file) or "/" (a directory: its files no longer name claims).
Prints every file no layer names and every import of a file in a higher
layer (an edge to the crate root counts as one to the bottom:
other files use only its glue bindings and parameters; a file and its own
child are exempt, as for cycles). Exits 1 if there is a cycle, an upward
import or a file without a layer. With --cycles-only, cycles alone are
checked (a crate without a layer list).
"""

import os
import re
import sys

ROOT = "kfd_preempt_main.rs"
MOD_DECL = re.compile(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', re.M)
PATH_ATTR_THEN_MOD = re.compile(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;')


TEST_ATTR = re.compile(r"#\[(?:cfg\(test\)|kunit_tests\([^)]*\))\]\s*(?:#\[[^\]]*\]\s*)*"
                       r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def strip_comments(text, keep_strings=False):
    """The code of a Rust file: comments (nested block comments too) left
    out, and the contents of string, raw string, byte string and character
    literals emptied (unless keep_strings), so that neither a "/*" in a
    string nor a brace in a character is read as code. Lifetimes ('a) are
    kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find('"' + m.group(1), i + m.end())
            stop = n if end < 0 else end + 1 + len(m.group(1))
            out.append(text[i:stop] if keep_strings else '""')
            i = stop
        elif c == '"' or (c == "b" and text.startswith('b"', i)):
            start = i
            i += 2 if c == "b" else 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append(text[start:i] if keep_strings else '""')
        elif c == "'" and (m := re.match(r"'(\\(?:[nrt0\\'\"]|x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\})|[^\\'])'", text[i:])):
            out.append("' '")
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_tests(text):
    """(text without its test modules' bodies, names of test module files);
    text has been through strip_comments."""
    out, files, pos = [], set(), 0
    for m in TEST_ATTR.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        if m.group(2) == ";":
            files.add(m.group(1))
            pos = m.end()
            continue
        # Comments and literals are gone (strip_comments): every brace
        # left is code.
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out), files


def crate_root(src):
    for name in (ROOT, "lib.rs", "main.rs"):
        if os.path.exists(os.path.join(src, name)):
            return os.path.join(src, name)
    return os.path.join(src, ROOT)


def module_tree(src):
    """({module path tuple: file}, {file: its code}), following mod
    declarations from the root, test modules left out; the code is what
    strip_comments and strip_tests leave of the file."""
    mods = {(): crate_root(src)}
    code = {}
    todo = [()]
    while todo:
        m = todo.pop()
        f = mods[m]
        raw = open(f, encoding="utf-8").read()
        text, tests = strip_tests(strip_comments(raw))
        code[f] = text
        base = os.path.dirname(f)
        own = os.path.splitext(os.path.basename(f))[0]
        child_dir = base if m == () or own == "mod" else os.path.join(base, own)
        paths = {name: p for p, name in PATH_ATTR_THEN_MOD.findall(strip_comments(raw, keep_strings=True))}
        for name in MOD_DECL.findall(text):
            if name in tests:
                continue
            if name in paths:
                cand = [os.path.join(base, paths[name])]
            else:
                cand = [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")]
            for c in cand:
                if os.path.exists(c):
                    mods[m + (name,)] = os.path.normpath(c)
                    todo.append(m + (name,))
                    break
    return mods, code


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
    mods, code = module_tree(src)
    edges = {}
    for m, f in mods.items():
        targets = set()
        for r in references(code[f], m):
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


def layer_block(path):
    """The lines of the layer list's block in an .rst or .rs file."""
    text = open(path, encoding="utf-8").read()
    if path.endswith(".rs"):
        lines = [l[4:] if l.startswith("//! ") else l[3:] for l in text.splitlines()
                 if l.startswith("//!")]
        try:
            i = lines.index("# Layers")
            i = next(j for j in range(i, len(lines)) if lines[j].startswith("```"))
        except (ValueError, StopIteration):
            return None
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        return lines[i + 1:end]
    lines = text.splitlines()
    try:
        start = next(i for i in range(len(lines) - 1)
                     if lines[i] == "Layers" and set(lines[i + 1]) <= set("=-~^"))
    except StopIteration:
        return None
    i = start + 2
    while i < len(lines) and not lines[i].rstrip().endswith("::"):
        i += 1
    block = []
    for line in lines[i + 1:]:
        if line.strip() and not line.startswith(" "):
            break
        block.append(line)
    return block


def read_layers(path):
    """[[name, ...], ...] top to bottom, from the layer list in path."""
    block = layer_block(path)
    if block is None:
        return None
    body = [l for l in block if l.strip()]
    if not body:
        return None
    indent = min(len(l) - len(l.lstrip()) for l in body)
    layers = []
    for line in body:
        if len(line) - len(line.lstrip()) != indent:
            continue
        names = []
        for tok in line.split():
            if not (tok.endswith(".rs") or tok.endswith("/")):
                break
            names.append(tok)
        if names:
            layers.append(names)
    return layers


def layer_of(layers, rel_file):
    """Index of the layer naming rel_file (relative to src/): a file name
    exactly, else the longest directory name that holds it."""
    best, best_len = None, -1
    for n, names in enumerate(layers):
        for name in names:
            if name == rel_file:
                return n
            if name.endswith("/") and rel_file.startswith(name) and len(name) > best_len:
                best, best_len = n, len(name)
    return best


def stale_names(layers, files, src):
    """Layer names that name no file of the crate."""
    rel = [os.path.relpath(f, src) for f in files]
    return [name for names in layers for name in names
            if not any(r == name or (name.endswith("/") and r.startswith(name)) for r in rel)]


def upward(mods, edges, layers, src):
    """(unlayered files, upward edges) against the layer list."""
    root = mods[()]
    rel = lambda f: os.path.relpath(f, src)
    bottom = len(layers)
    unlayered = sorted(rel(f) for f in edges if f != root and layer_of(layers, rel(f)) is None)
    bad = []
    for a, bs in sorted(edges.items()):
        la = layer_of(layers, rel(a))
        if a == root or la is None:
            continue
        for b in sorted(bs):
            if parent_child(mods, a, b):
                continue
            lb = bottom if b == root else layer_of(layers, rel(b))
            if lb is not None and lb < la:
                bad.append((rel(a), rel(b)))
    return unlayered, bad


def main(argv):
    args = [a for a in argv[1:] if a not in ("--edges", "--cycles-only")]
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
    if "--cycles-only" in argv:
        print(f"{len(mods)} files, {sum(len(b) for b in edges.values())} imports, {len(found)} cycles")
        return 1 if found else 0
    design = args[1] if len(args) > 1 else os.path.join(src, "..", "Documentation", "design.rst")
    layers = read_layers(design)
    if not layers:
        print(f"no layer list in {design}, \"Layers\"")
        return 1
    unlayered, bad = upward(mods, edges, layers, src)
    stale = stale_names(layers, mods.values(), src)
    for f in unlayered:
        print(f"no layer: {f}")
    for name in stale:
        print(f"layer names no file: {name}")
    for a, b in bad:
        print(f"upward import: {a} -> {b}")
    print(f"{len(mods)} files in {len(layers)} layers, {sum(len(b) for b in edges.values())} imports, "
          f"{len(found)} cycles, {len(bad)} upward, {len(unlayered)} without a layer, "
          f"{len(stale)} stale names")
    return 1 if found or bad or unlayered or stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
