#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count the cases of several VM runs once each.

`make check` boots the VM twice, with the module configured differently
(simulated nodes; pid_attach=1). A kselftest whose cases depend on the
configuration runs in both, and each of its cases passes in the run it is
for and SKIPs in the other. Counting both runs would count such a case
twice, once as a skip that only means "the other run has it". Here a case
(suite and name) counts once: failed if it failed in any run, passed if it
passed in one, skipped only if every run skipped it, which then means it
cannot run here at all (a GPU).

usage: merge_cases.py [--label NAME] CASES.tsv ...   (ktap.py --cases files)
Prints 'NAME (merged): N passed, M failed, K skipped' (NAME: vm).
"""
import sys

RANK = {"skip": 0, "pass": 1, "fail": 2}


def main(args):
    label = "vm"
    if args[:1] == ["--label"]:
        label, args = args[1], args[2:]
    merged = {}
    for path in args:
        with open(path) as f:
            for line in f:
                suite, case, result = line.rstrip("\n").split("\t")
                key = (suite, case)
                if RANK[result] > RANK.get(merged.get(key), -1):
                    merged[key] = result
    counts = {r: sum(1 for v in merged.values() if v == r) for r in RANK}
    print(f"{label} (merged): {counts['pass']} passed, {counts['fail']} failed, "
          f"{counts['skip']} skipped")
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
