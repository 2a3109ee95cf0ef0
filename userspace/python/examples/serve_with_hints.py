# SPDX-License-Identifier: GPL-2.0 OR MIT
"""A latency-critical service that tells kfd-preemptd each request is
coming, so that best-effort work is off the GPU before its first kernel.

The service's own parts are the two callables: ``prepare`` (parse,
tokenize, copy inputs: host work) and ``launch`` (the GPU work). Without
the daemon, or when it refuses a hint, requests are served all the same.
One connection holds one hint: a service that prepares requests on
several threads gives each thread a ``serve`` loop of its own.
"""

from __future__ import annotations

import contextlib
import os
import queue
from typing import Callable, Optional, TypeVar

import kfd_preempt

Batch = TypeVar("Batch")

# The daemon's hint_socket (its configuration file says where).
HINT_SOCKET = os.environ.get("KFDP_HINT_SOCKET", "/run/kfd-preemptd/hint.sock")
# The longest a request's preparation takes before its first kernel.
PREPARATION_BOUND = 0.050


def connect() -> Optional[kfd_preempt.HintClient]:
    try:
        return kfd_preempt.HintClient(HINT_SOCKET)
    except kfd_preempt.KfdPreemptError as e:
        print(f"serving without hints: {e.strerror}")
        return None


def serve(
    requests: "queue.Queue[Optional[bytes]]",
    prepare: Callable[[bytes], Batch],
    launch: Callable[[Batch], None],
) -> None:
    client = connect()
    while (request := requests.get()) is not None:
        with contextlib.ExitStack() as hinted:
            if client is not None:
                try:
                    # Leaving the block normally lets the launched work
                    # spend the hint; an exception in prepare() ends it.
                    hinted.enter_context(kfd_preempt.hint(client, PREPARATION_BOUND))
                except kfd_preempt.KfdPreemptError as e:
                    # Refused (not a tenant yet: no GPU queues; over the
                    # daemon's rate) or the daemon is gone: no hint, and
                    # the request is served all the same.
                    print(f"no hint for this request: {e.strerror}")
            launch(prepare(request))
