# SPDX-License-Identifier: GPL-2.0 OR MIT
"""A scheduler that takes a best-effort process's GPU queues off for a
latency-critical burst and puts them back (needs CAP_SYS_NICE).

    python3 preempt_best_effort.py PID SECONDS
"""

from __future__ import annotations

import sys
import time

import kfd_preempt


def hold_off(pid: int, seconds: float) -> None:
    with kfd_preempt.Device() as dev:
        target = dev.attach(pid)
        queues = [q.queue_ref() for q in target.query() if q.active]
        # The lease bounds the preemption even if this process stalls or
        # dies: the module puts the queues back itself after it.
        report = dev.preempt(queues, lease=seconds + 1.0)
        for ref, outcome in report.failures():
            print(f"queue {ref.queue_id} on {ref.gpu_id:#x}: {outcome.message}")
        print(
            f"{report.num_ok}/{len(queues)} queues off in {report.elapsed * 1e3:.2f} ms, "
            f"{report.runlist_updates} runlist update(s)"
        )
        time.sleep(seconds)  # the latency-critical work runs here
        dev.resume([ref for ref, outcome in report.outcomes if outcome.ok])
    # Closing the device would have put them back too.


if __name__ == "__main__":
    try:
        hold_off(int(sys.argv[1]), float(sys.argv[2]))
    except kfd_preempt.KfdPreemptError as e:
        sys.exit(f"kfd_preempt: {e.strerror}")
    except (IndexError, ValueError):
        sys.exit(__doc__)
