# SPDX-License-Identifier: GPL-2.0 OR MIT
"""The Python package's tests: fixtures, and KTAP output.

``-p ktap_report`` (tests/ktap_report.py) turns a run into KTAP lines and
the "N passed, M failed, K skipped" line make check adds up, so that the
suite counts like every other. Cases that need the module (the simulated
nodes) skip on a host without ``/dev/kfd_preempt`` and run in the VM
(tests/vm/python_test.sh).
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
from typing import Callable, Iterator, List, Optional

import pytest

import kfd_preempt


@pytest.fixture
def device() -> Iterator[kfd_preempt.Device]:
    if not os.path.exists(kfd_preempt.DEVICE_PATH):
        pytest.skip("no /dev/kfd_preempt: the module's cases run in the VM")
    with kfd_preempt.Device() as dev:
        yield dev


@pytest.fixture
def tenant(device: kfd_preempt.Device) -> Iterator[kfd_preempt.SimTenant]:
    if not os.path.exists(kfd_preempt.SIM_TENANT_PATH):
        pytest.skip("no simulated nodes (load the module with sim_nodes=N)")
    # Closed at the end of each test, even a failed one (whose frame pytest
    # keeps): the next test's tenant is a new one.
    with kfd_preempt.SimTenant() as t:
        yield t


class FakeDaemon:
    """kfd-preemptd's hint socket as the tests script it: each request is
    recorded, and answered by ``answer(request)`` (``None``: no answer)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.requests: List[str] = []
        self.answer: Callable[[str], Optional[str]] = lambda r: "ok 1"
        self.closed = threading.Event()
        self.got = threading.Condition()
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(path)
        self.listener.listen(4)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            while True:
                msg = conn.recv(128)
                if not msg:
                    self.closed.set()
                    return
                text = msg.decode()
                with self.got:
                    # The answer of the moment the request came, before a
                    # waiting test can change it.
                    reply = self.answer(text)
                    self.requests.append(text)
                    self.got.notify_all()
                if reply is not None:
                    conn.send(reply.encode())

    def wait_for(self, count: int, timeout: float = 5.0) -> List[str]:
        with self.got:
            self.got.wait_for(lambda: len(self.requests) >= count, timeout)
            return list(self.requests)


@pytest.fixture
def fake_daemon() -> Iterator[FakeDaemon]:
    with tempfile.TemporaryDirectory() as d:
        daemon = FakeDaemon(os.path.join(d, "hint.sock"))
        yield daemon
        daemon.listener.close()
