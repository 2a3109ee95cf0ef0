# SPDX-License-Identifier: GPL-2.0 OR MIT
"""Take best-effort GPU queues off AMD GPUs, and tell kfd-preemptd that
latency-critical work is coming.

Two halves (Documentation/python.rst):

* the scheduler API of the kfd_preempt kernel module (``/dev/kfd_preempt``,
  ``CAP_SYS_NICE``): :class:`Device`, :class:`Target`, batches of
  :class:`QueueRef` answered by :class:`BatchReport`, freeze and thaw,
  watching queues' activity;
* the hint client of kfd-preemptd, for a latency-critical service:
  :class:`HintClient` and its context manager :meth:`HintClient.hint`.

Every error is a :class:`KfdPreemptError`, an :class:`OSError` whose
``errno`` is the error number and ``strerror`` the library's message.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Sequence

from ._native import (
    ABI_MAJOR,
    DEVICE_PATH,
    MAX_LEASE,
    SIM_TENANT_PATH,
    Activity,
    BatchReport,
    Device,
    HintClient,
    HintRefused,
    Info,
    KfdPreemptError,
    Outcome,
    QueueInfo,
    QueueRef,
    Sample,
    SimQueueStatus,
    SimTenant,
    Target,
    kfd_processes,
)

__all__ = [
    "ABI_MAJOR",
    "DEVICE_PATH",
    "MAX_LEASE",
    "SIM_TENANT_PATH",
    "Activity",
    "BatchReport",
    "Device",
    "HintClient",
    "HintRefused",
    "Info",
    "KfdPreemptError",
    "Outcome",
    "QueueInfo",
    "QueueRef",
    "Sample",
    "SimQueueStatus",
    "SimTenant",
    "Target",
    "hint",
    "kfd_processes",
]


@contextlib.contextmanager
def hint(
    client: HintClient, within: float, nodes: Optional[Sequence[int]] = None
) -> Iterator[int]:
    """Hint for the span of a ``with`` block: a request's preparation.

    On entry the daemon is told that work is coming within ``within``
    seconds (``HintClient.begin``; the block gets the number of nodes the
    hint holds on). Leaving the block normally lets the hint run its
    course: the work launched in the block spends it, or its time ends it.
    Leaving by an exception ends it at once (the request was abandoned, no
    work is coming). A refused hint raises :class:`HintRefused` on entry.
    """
    held = client.begin(within, list(nodes) if nodes is not None else None)
    try:
        yield held
    except BaseException:
        with contextlib.suppress(KfdPreemptError):
            client.end()
        raise
