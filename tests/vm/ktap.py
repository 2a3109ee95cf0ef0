#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Judge one run of the test VM from its two serial logs.

console.log (ttyS0) holds the kernel log, including the KUnit KTAP that the
module's suites print at insmod; results.log (ttyS1) holds what /init and the
kselftests printed. This prints one summary line per suite, every problem
found, and a last line 'vm: N passed, M failed, K skipped'. Exit status 0
only if nothing failed, every step succeeded, the VM reached the end, and the
kernel log has no warning, BUG, Oops, lockdep or KASAN report.

With --cases FILE it also writes each case's outcome, one
'suite<TAB>case<TAB>pass|fail|skip' line each, for merge_cases.py: the
runs of one `make check` (two module configurations) count a case once.
"""

import re
import sys

RESULT = re.compile(r"^(?P<indent>\s*)(?P<not>not )?ok (?P<num>\d+)(?: -)? ?(?P<name>[^#]*?)\s*(?:#\s*(?P<directive>\S+)(?P<reason>.*))?$")
PLAN = re.compile(r"^(?P<indent>\s*)1\.\.(?P<count>\d+)")
PRINTK = re.compile(r"^\[\s*\d+\.\d+\] ")

# Kernel log lines that fail the run whatever the tests said: warnings,
# BUGs (KASAN, sleeping in atomic, spinlock), Oopses, lockdep, hung tasks.
KERNEL_PROBLEMS = re.compile(
    r"WARNING:|BUG:|Oops|general protection fault|Kernel panic|"
    r"kernel BUG at|possible circular locking|possible recursive locking|"
    r"inconsistent lock state|lock held when returning|"
    r"INFO: task .* blocked for more than|soft lockup|hard LOCKUP|"
    r"list_add corruption|list_del corruption|UBSAN:|"
    r"Memory leak|refcount_t: "
)


class Stream:
    """Counts the leaf results of one KTAP/TAP stream, checking its plans."""

    def __init__(self, label):
        self.label = label
        self.passed = self.failed = self.skipped = 0
        self.problems = []
        self.cases = []  # (name, "pass" | "fail" | "skip")
        self.levels = {}  # indent -> [planned, seen, had_children]
        self.last_indent = None

    def _close_deeper(self, indent):
        for lvl in sorted([l for l in self.levels if l > indent], reverse=True):
            planned, seen, _ = self.levels.pop(lvl)
            if planned is not None and planned != seen:
                self.problems.append(
                    f"{self.label}: plan said {planned} tests, {seen} reported "
                    "(a test crashed or hung?)")

    def line(self, text):
        m = PLAN.match(text)
        if m:
            indent = len(m.group("indent"))
            self._close_deeper(indent - 1)
            self.levels[indent] = [int(m.group("count")), 0, False]
            return
        m = RESULT.match(text)
        if not m:
            if text.strip().startswith("Bail out!"):
                self.failed += 1
                self.problems.append(f"{self.label}: {text.strip()}")
            return
        indent = len(m.group("indent"))
        deeper = any(l > indent for l in self.levels)
        self._close_deeper(indent)
        level = self.levels.setdefault(indent, [None, 0, False])
        level[1] += 1
        if deeper:
            return  # a suite's own line: its cases were counted already
        directive = (m.group("directive") or "").upper()
        name = m.group("name").strip()
        if directive == "SKIP":
            self.skipped += 1
            self.cases.append((name, "skip"))
        elif m.group("not") and directive != "TODO":
            self.failed += 1
            self.problems.append(f"{self.label}: not ok {name}")
            self.cases.append((name, "fail"))
        else:
            self.passed += 1
            self.cases.append((name, "pass"))

    def finish(self):
        self._close_deeper(-1)


def kunit_streams(console):
    """KUnit suites in the kernel log, one Stream per suite.

    A module's suites come as one top-level plan ('1..N', N suites) followed
    by N indented suites, each closed by its own unindented result line.
    """
    streams, problems = [], []
    current, suite_indent = None, 0
    group_plan, group_seen = None, 0

    def close_group():
        if group_plan is not None and group_seen != group_plan:
            problems.append(f"kunit: {group_plan} suites planned, {group_seen} reported")

    for raw in console:
        text = PRINTK.sub("", raw.rstrip("\n"), count=1)
        if current is None and text.strip() == "kunit: disabled":
            # kunit.enable=0 (tests/vm/run --no-kunit): the module's plan
            # is printed, its suites are not run, as asked.
            group_plan = None
            continue
        if current is None:
            m = PLAN.match(text)
            if m and not m.group("indent"):
                close_group()
                group_plan, group_seen = int(m.group("count")), 0
                continue
            m = re.match(r"^(\s+)# Subtest: (\S+)", text)
            if m:
                suite_indent = len(m.group(1))
                current = Stream(f"kunit {m.group(2)}")
            continue
        m = RESULT.match(text)
        if m and len(m.group("indent")) < suite_indent:
            # The suite's own result line ends it.
            current.finish()
            if m.group("not") and current.failed == 0:
                current.failed += 1
                current.problems.append(f"{current.label}: suite reported not ok")
            streams.append(current)
            group_seen += 1
            current = None
            continue
        current.line(text[suite_indent:] if text.startswith(" " * suite_indent) else text)
    if current is not None:
        current.finish()
        current.failed += 1
        current.problems.append(f"{current.label}: suite never finished (crash or hang)")
        streams.append(current)
        group_seen += 1
    close_group()
    if problems:
        broken = Stream("kunit")
        broken.failed, broken.problems = 1, problems
        streams.append(broken)
    return streams


def kselftest_streams(results):
    """One Stream per kselftest binary, delimited by /init's markers."""
    streams, current = [], None
    for raw in results:
        text = raw.rstrip("\n").replace("\r", "")
        m = re.match(r"^# kfdp-vm: kselftest begin (\S+)", text)
        if m:
            current = Stream(f"kselftest {m.group(1)}")
            continue
        m = re.match(r"^# kfdp-vm: kselftest end (\S+) rc=(\d+)", text)
        if m and current is not None:
            current.finish()
            rc = int(m.group(2))
            if rc not in (0, 4):  # KSFT_PASS, KSFT_SKIP
                current.problems.append(f"{current.label}: exited with {rc}")
                if current.failed == 0:
                    current.failed += 1
            if current.passed + current.failed + current.skipped == 0 and rc == 0:
                current.failed += 1
                current.problems.append(f"{current.label}: ran no test")
            streams.append(current)
            current = None
            continue
        if current is not None:
            current.line(text)
    if current is not None:
        current.finish()
        current.failed += 1
        current.problems.append(f"{current.label}: never finished (crash or hang)")
        streams.append(current)
    return streams


def main(console_path, results_path, expected, cases_path=None):
    with open(console_path, errors="replace") as f:
        console = f.readlines()
    with open(results_path, errors="replace") as f:
        results = f.readlines()

    streams = kunit_streams(console) + kselftest_streams(results)
    problems = []
    for s in streams:
        print(f"{s.label}: {s.passed} passed, {s.failed} failed, {s.skipped} skipped")
        problems += s.problems

    reported = {s.label for s in streams}
    for label in expected:
        if label not in reported:
            problems.append(f"{label}: expected, but it reported nothing")

    for raw in results:
        m = re.match(r"^# kfdp-vm: (step (\S+)|extra end) rc=(\d+)", raw.strip())
        if m and m.group(3) != "0":
            problems.append(f"VM {m.group(2) or 'extra command'} failed with exit status {m.group(3)}")
    if not any(r.startswith("# kfdp-vm: done") for r in results):
        problems.append("the VM did not reach the end of /init (kernel crash, hang or timeout)")

    for raw in console:
        if KERNEL_PROBLEMS.search(raw):
            problems.append("kernel log: " + PRINTK.sub("", raw.strip(), count=1))

    passed = sum(s.passed for s in streams)
    failed = sum(s.failed for s in streams)
    skipped = sum(s.skipped for s in streams)
    if problems and failed == 0:
        failed = 1  # a problem outside any test case still fails the run
    for p in problems:
        print(f"FAIL: {p}")
    print(f"vm: {passed} passed, {failed} failed, {skipped} skipped")
    if cases_path:
        with open(cases_path, "w") as f:
            for s in streams:
                for name, result in s.cases:
                    f.write(f"{s.label}\t{name}\t{result}\n")
                # Failures outside any case (a crash, a plan mismatch).
                for _ in range(s.failed - sum(r == "fail" for _, r in s.cases)):
                    f.write(f"{s.label}\t(outside any case)\tfail\n")
            if problems and failed == 1 and not any(s.failed for s in streams):
                f.write("vm\t(run)\tfail\n")
    return 1 if problems or failed else 0


if __name__ == "__main__":
    # usage: ktap.py [--cases FILE] console.log results.log [expected ...]
    args = sys.argv[1:]
    cases = None
    if args[:1] == ["--cases"]:
        cases, args = args[1], args[2:]
    sys.exit(main(args[0], args[1], args[2:], cases))
