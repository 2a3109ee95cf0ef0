# SPDX-License-Identifier: GPL-2.0 OR MIT
"""A pytest plugin that reports in KTAP: one ``ok``/``not ok`` line per
test (a failure's report as ``#`` lines before it), then the summary line
make check counts. Load it with ``-p ktap_report`` and ``-p no:terminal``
(its directory on ``sys.path``)."""

from __future__ import annotations

import sys

import pytest

_counts = {"passed": 0, "failed": 0, "skipped": 0}
_number = 0


def _emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def pytest_sessionstart(session: pytest.Session) -> None:
    _emit("TAP version 13")


def pytest_collection_finish(session: pytest.Session) -> None:
    _emit(f"1..{len(session.items)}")


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A test file that does not import fails the run visibly.
    if report.failed:
        _counts["failed"] += 1
        for line in str(report.longrepr).splitlines():
            _emit(f"# {line}")
        _emit(f"not ok 0 collect {report.nodeid}")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _number
    name = report.nodeid.split("::", 1)[-1].replace("::", ".")
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _number += 1
        if report.skipped:
            _counts["skipped"] += 1
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
            _emit(f"ok {_number} {name} # SKIP {reason.removeprefix('Skipped: ')}")
        elif report.passed:
            _counts["passed"] += 1
            _emit(f"ok {_number} {name}")
        else:
            _counts["failed"] += 1
            for line in str(report.longrepr).splitlines():
                _emit(f"# {line}")
            _emit(f"not ok {_number} {name}")
    elif report.when == "teardown" and report.failed:
        _number += 1
        _counts["failed"] += 1
        for line in str(report.longrepr).splitlines():
            _emit(f"# {line}")
        _emit(f"not ok {_number} {name} (teardown)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    c = _counts
    _emit(f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
