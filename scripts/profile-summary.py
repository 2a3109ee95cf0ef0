#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Summarise tests/vm/profile.sh's function_graph traces.

For each profiled call: the mean wall time measured untraced by
profile_batch, and, from the trace, the mean traced time of one ioctl
syscall (__x64_sys_ioctl, depth 1, whose one child is __se_sys_ioctl)
split into the functions at depth 3 (the C functions the module's Rust
code calls, since Rust has no ftrace entry, and the VFS's own checks) and
the rest ("Rust and untraced"), which is what they do not account for.

usage: profile-summary.py RESULTS_LOG
       profile-summary.py --compare REV RESULTS_LOG   (profile_compare.sh's)
"""
import re
import sys
from collections import defaultdict

BEGIN = re.compile(r"^=== kfdp-profile (\S+) (\d+) begin: \S+ \d+ \d+ (\d+) ===")
END = re.compile(r"^=== kfdp-profile (\S+) (\d+) end ===")
# " 1)   0.123 us    |    name();"  or  " 1) + 12.3 us | } /* name */"
LINE = re.compile(r"^\s*\d+\)\s+([+!#*@$ ]?)\s*([\d.]+ us)?\s*\|(\s*)(.*)$")


def parse(lines):
    """Yields (per-call total us, {child: us}) for each traced ioctl."""
    stack = []
    for line in lines:
        m = LINE.match(line)
        if not m:
            continue
        dur = float(m.group(2).split()[0]) if m.group(2) else None
        depth = len(m.group(3)) // 2
        body = m.group(4).strip()
        if body.endswith("{"):
            stack.append((depth, body[:-1].strip().rstrip("()")))
            if depth == 1:
                children = defaultdict(float)
            continue
        if body.startswith("}"):
            if not stack:
                continue
            d, name = stack.pop()
            if d == 1 and dur is not None:
                yield dur, children
            elif d == 3 and dur is not None:
                children[name] += dur
            continue
        if body.endswith(";") and dur is not None and depth == 3:
            children[body[:-1].rstrip("()")] += dur


COMPARE = re.compile(r"^=== kfdp-compare (\w+): (.*)$")


def compare(rev, path):
    """Median over rounds of each call's median, per build, and its ratio
    to the same build's INFO."""
    runs = defaultdict(lambda: defaultdict(list))
    for line in open(path, errors="replace").read().splitlines():
        m = COMPARE.match(line.rstrip("\r"))
        if not m:
            continue
        words = m.group(2).split()
        for i in range(0, len(words) - 2, 3):
            runs[m.group(1)][f"{words[i]} K={words[i + 1]}"].append(int(words[i + 2]))
    med = lambda v: sorted(v)[len(v) // 2]
    calls = list(runs["current"].keys())
    print(f"{'call':<16} {'baseline ' + rev[:10]:>28} {'this checkout':>24}")
    for c in calls:
        b, n = med(runs["baseline"][c]), med(runs["current"][c])
        bi, ni = med(runs["baseline"]["info K=1"]), med(runs["current"]["info K=1"])
        print(f"{c:<16} {b / 1000:>9.2f} us = {b / bi:>6.1f}x INFO {n / 1000:>9.2f} us = {n / ni:>6.1f}x INFO")


def main():
    if sys.argv[1] == "--compare":
        compare(sys.argv[2], sys.argv[3])
        return
    text = open(sys.argv[1], errors="replace").read().splitlines()
    sections, cur = [], None
    for line in text:
        line = line.rstrip("\r")
        m = BEGIN.match(line)
        if m:
            cur = (m.group(1), int(m.group(2)), int(m.group(3)) / 1000.0, [])
            continue
        if END.match(line) and cur:
            sections.append(cur)
            cur = None
            continue
        if cur:
            cur[3].append(line)
    for mode, k, untraced_us, lines in sections:
        calls = list(parse(lines))
        # profile_batch's preempt mode also RESUMEs; the timed PREEMPT is
        # every other call. The other modes' calls are all alike except
        # FREEZE, followed by THAW.
        if mode in ("preempt", "freeze"):
            calls = calls[0::2]
        if not calls:
            print(f"{mode} K={k}: no traced call")
            continue
        n = len(calls)
        total = sum(c[0] for c in calls) / n
        per = defaultdict(float)
        for _, ch in calls:
            for name, us in ch.items():
                per[name] += us / n
        print(f"{mode} K={k}: {untraced_us:.1f} us untraced; traced {total:.1f} us per call over {n} calls")
        rest = total - sum(per.values())
        rows = sorted(per.items(), key=lambda kv: -kv[1])
        for name, us in rows[:8]:
            print(f"  {us:9.1f} us  {100 * us / total:5.1f}%  {name}")
        others = sum(us for _, us in rows[8:])
        if others:
            print(f"  {others:9.1f} us  {100 * others / total:5.1f}%  ({len(rows) - 8} other functions)")
        print(f"  {rest:9.1f} us  {100 * rest / total:5.1f}%  Rust and untraced")


if __name__ == "__main__":
    main()
