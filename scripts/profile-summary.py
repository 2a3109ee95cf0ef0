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


def main():
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
