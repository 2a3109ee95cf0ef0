#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The module's source lines a fuzzing campaign reached (make fuzz).

usage: scripts/fuzz-coverage.py KO PCS OUTDIR

KO is the kfd_preempt.ko the VM loaded (built with KFDP_KCOV=1: KCOV's
calls and line tables); PCS is kfdp-fuzz's pcs.txt: the module's section
addresses in the VM ("section NAME ADDR") and every PC KCOV recorded
("pc ADDR"). KCOV records the return address of each call to
__sanitizer_cov_trace_pc, so the instrumented sites are those calls' ends,
found in the .ko's relocations. Each site is mapped to its source line
(llvm-addr2line; the innermost inlined frame), and a line counts as reached
if one of its sites was.

Writes OUTDIR/coverage.txt (per file: sites and lines reached of those
instrumented, the module's own sources first, each file's unreached lines)
and OUTDIR/coverage.html (each source file with reached lines green,
unreached instrumented lines red).
"""

import collections
import html
import os
import re
import subprocess
import sys

LLVM = os.environ.get("KFDP_LLVM_VERSION", "22")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Files no ioctl reaches, and why (reported apart, not in the share).
NOT_IOCTL = [
    (re.compile(r"(_test\.c|/kunit\.rs)$|src/backend/mock\.rs$"),
     "KUnit suites and their mock backend: run at insmod"),
    (re.compile(r"src/kfd_preempt_main\.rs$"), "module init and exit"),
    (re.compile(r"src/layout(/.*)?\.rs$|src/(compat|pm)\.rs$|glue/kfdp_(layout|modinfo|pm)\.c$"),
     "load-time gates (layout, BTF) and power management"),
    (re.compile(r"src/backend/amdkfd\.rs$|glue/kfdp_(queues|nodes|target)\.c$"),
     "the amdkfd backend: no KFD process can exist in the VM (no GPU)"),
    (re.compile(r"src/stats\.rs$|src/backend/sim/(knobs|preempt_log)\.rs$"),
     "debugfs: the oracles read it, outside the traced calls"),
    (re.compile(r"glue/kfdp_trace\.[ch]$|src/trace\.rs$"),
     "tracepoints: not enabled during the campaign"),
]


def sites(ko):
    """(section, offset) of each return address of a KCOV call."""
    out = subprocess.run(
        [f"llvm-objdump-{LLVM}", "-dr", "--no-show-raw-insn", ko],
        check=True, capture_output=True, text=True).stdout
    section = None
    found = []
    for line in out.splitlines():
        m = re.match(r"Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"\s*([0-9a-f]+):\s+R_X86_64_(PLT32|PC32)\s+__sanitizer_cov_trace_pc", line)
        if m and section:
            # The relocation is the call's 4-byte operand; it returns to
            # the byte after it.
            found.append((section, int(m.group(1), 16) + 4))
    return found


def lines_of(ko, section_sites):
    """{(section, offset): "file:line"} by llvm-addr2line, for .text sites.

    A relocatable .ko has every section at address 0, and llvm-addr2line
    resolves addresses in .text; the few sites of .init.text and
    .exit.text are module load and unload, counted apart. Of the inlined
    frames of a site, the innermost one in the module's own sources names
    its line (a kernel crate helper inlined into an ioctl counts for the
    ioctl's line); a site with none is the kernel crate's.
    """
    result = {}
    offs = [off for s, off in section_sites if s == ".text"]
    for s, off in section_sites:
        if s != ".text":
            result[(s, off)] = "src/kfd_preempt_main.rs:0"
    # The call itself (offset - 1) is on the site's line; the return
    # address may already be the next line's.
    inp = "\n".join(hex(o - 1) for o in offs) + "\n"
    out = subprocess.run(
        [f"llvm-addr2line-{LLVM}", "-e", ko, "-a", "-i"],
        input=inp, check=True, capture_output=True, text=True).stdout
    frames = {}
    cur = None
    for line in out.splitlines():
        if line.startswith("0x"):
            cur = int(line, 16) + 1
            frames[cur] = []
        elif cur is not None and line:
            frames[cur].append(line)
    for off in offs:
        fs = frames.get(off, []) or ["??:0"]
        own = [f for f in fs if f.startswith(ROOT + "/")]
        result[(".text", off)] = normalise(own[0] if own else fs[0])
    return result


def normalise(loc):
    path, _, rest = loc.partition(":")
    line = rest.split(":")[0]
    if path.startswith(ROOT + "/"):
        path = path[len(ROOT) + 1:]
    m = re.search(r"/linux/(rust/.*|include/.*|arch/.*)$", path)
    if m:
        path = "kernel:" + m.group(1)
    m = re.search(r"/rustlib/src/rust/library/(.*)$", path)
    if m:
        path = "kernel:" + m.group(1)
    return f"{path}:{line}"


def why_not(path):
    for rx, why in NOT_IOCTL:
        if rx.search(path):
            return why
    return None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ko, pcs_file, outdir = sys.argv[1:]
    bases, pcs = {}, set()
    with open(pcs_file) as f:
        for line in f:
            w = line.split()
            if len(w) == 3 and w[0] == "section":
                bases[w[1]] = int(w[2], 16)
            elif len(w) == 2 and w[0] == "pc":
                pcs.add(int(w[1], 16))
    if ".text" not in bases:
        sys.exit("fuzz-coverage: no module section addresses in " + pcs_file)
    all_sites = sites(ko)
    if not all_sites:
        sys.exit("fuzz-coverage: no KCOV calls in " + ko + " (built without KFDP_KCOV=1?)")
    reached = {(s, off) for s, off in all_sites if s in bases and bases[s] + off in pcs}
    if pcs and not reached:
        # KCOV subtracts the KASLR offset from every PC (canonicalize_ip):
        # a kernel with RANDOMIZE_BASE needs it added back first.
        sys.exit("fuzz-coverage: none of the %d PCs is a KCOV site of %s (KASLR? another .ko?)"
                 % (len(pcs), ko))
    unknown = len(pcs) - len(reached)
    where = lines_of(ko, all_sites)

    per_file = collections.defaultdict(lambda: {"sites": 0, "hit": 0, "lines": {}})
    for site in all_sites:
        loc = where[site]
        path, _, line = loc.rpartition(":")
        pf = per_file[path]
        pf["sites"] += 1
        hit = site in reached
        pf["hit"] += hit
        n = int(line) if line.isdigit() else 0
        pf["lines"][n] = pf["lines"].get(n, False) or hit

    def totals(paths):
        s = sum(per_file[p]["sites"] for p in paths)
        h = sum(per_file[p]["hit"] for p in paths)
        ln = sum(len(per_file[p]["lines"]) for p in paths)
        lh = sum(sum(per_file[p]["lines"].values()) for p in paths)
        return s, h, ln, lh

    own = sorted(p for p in per_file if p.startswith("src/"))
    reachable = [p for p in own if why_not(p) is None]
    other = [p for p in own if why_not(p) is not None]
    kernel = sorted(p for p in per_file if not p.startswith("src/"))

    out = []
    s, h, ln, lh = totals(reachable)
    out.append(f"ioctl-reachable module source: {lh} of {ln} instrumented lines reached "
               f"({100.0 * lh / max(ln, 1):.1f} %), {h} of {s} KCOV sites")
    s2, h2, ln2, lh2 = totals(other)
    out.append(f"not ioctl-reachable here: {lh2} of {ln2} lines ({h2} of {s2} sites)")
    s3, h3, ln3, lh3 = totals(kernel)
    out.append(f"the kernel crate, core and C headers, inlined into the module: {lh3} of {ln3} lines "
               f"({h3} of {s3} sites)")
    if unknown:
        out.append(f"PCs at no known site: {unknown}")
    out.append("")
    out.append("per file (ioctl-reachable): lines reached/instrumented, sites reached/instrumented")
    for p in sorted(reachable, key=lambda p: -(len(per_file[p]["lines"]) - sum(per_file[p]["lines"].values()))):
        pf = per_file[p]
        lh_ = sum(pf["lines"].values())
        out.append(f"  {p}: {lh_}/{len(pf['lines'])} lines, {pf['hit']}/{pf['sites']} sites")
    out.append("")
    out.append("not reachable through the ioctls here, and why:")
    for p in other:
        pf = per_file[p]
        out.append(f"  {p}: {sum(pf['lines'].values())}/{len(pf['lines'])} lines ({why_not(p)})")
    out.append("")
    out.append("unreached lines of the ioctl-reachable files:")
    for p in reachable:
        miss = sorted(n for n, hit in per_file[p]["lines"].items() if not hit)
        if miss:
            out.append(f"  {p}: {', '.join(map(str, miss))}")
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "coverage.txt"), "w") as f:
        f.write("\n".join(out) + "\n")

    page = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>kfd_preempt fuzz coverage</title>",
            "<style>body{font-family:sans-serif}pre{font-size:12px}.h{background:#cfc}"
            ".m{background:#fcc}</style></head><body>",
            f"<h1>kfd_preempt: source lines the fuzzer reached</h1><p>{html.escape(out[0])}</p><ul>"]
    for p in reachable + other:
        page.append(f"<li><a href='#{html.escape(p)}'>{html.escape(p)}</a></li>")
    page.append("</ul>")
    for p in reachable + other:
        try:
            with open(os.path.join(ROOT, p), encoding="utf-8", errors="replace") as f:
                src = f.read().splitlines()
        except OSError:
            continue
        page.append(f"<h2 id='{html.escape(p)}'>{html.escape(p)}</h2><pre>")
        marks = per_file[p]["lines"]
        for i, text in enumerate(src, 1):
            cls = "" if i not in marks else (" class='h'" if marks[i] else " class='m'")
            page.append(f"<span{cls}>{i:5} {html.escape(text)}</span>")
        page.append("</pre>")
    page.append("</body></html>")
    with open(os.path.join(outdir, "coverage.html"), "w") as f:
        f.write("\n".join(page) + "\n")
    print(out[0])


if __name__ == "__main__":
    main()
