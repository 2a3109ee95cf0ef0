# SPDX-License-Identifier: GPL-2.0 OR MIT
"""The hint client against a scripted daemon socket: what goes on the wire,
how answers and refusals come back, and what the context manager sends."""

from __future__ import annotations

import errno
import os

import pytest

import kfd_preempt
from kfd_preempt import HintClient, HintRefused, KfdPreemptError


def test_begin_sends_whole_milliseconds_and_returns_the_nodes(fake_daemon):
    fake_daemon.answer = lambda r: "ok 2"
    with HintClient(fake_daemon.path) as client:
        assert client.begin(0.02) == 2
        assert client.begin(0.0059, [0x5100, 17]) == 2
    assert fake_daemon.wait_for(2) == ["begin 20", "begin 5 0x5100 0x11"]


def test_a_refusal_is_hint_refused_with_reason_and_errno(fake_daemon):
    fake_daemon.answer = lambda r: "refused not-a-tenant"
    with HintClient(fake_daemon.path) as client:
        with pytest.raises(HintRefused) as e:
            client.begin(0.01)
    assert e.value.reason == "not-a-tenant"
    assert e.value.errno == errno.EPERM
    assert "not one of kfd-preemptd's tenants" in e.value.strerror


def test_a_reply_that_is_not_one_is_eproto(fake_daemon):
    fake_daemon.answer = lambda r: "maybe"
    with HintClient(fake_daemon.path) as client:
        with pytest.raises(KfdPreemptError) as e:
            client.begin(0.01)
    assert e.value.errno == errno.EPROTO


def test_notify_does_not_wait_and_counts_refusals(fake_daemon):
    answers = iter(["ok 1", "refused rate-limited", "refused rate-limited"])
    fake_daemon.answer = lambda r: next(answers)
    with HintClient(fake_daemon.path) as client:
        for _ in range(3):
            client.notify(0.01)
        fake_daemon.wait_for(3)
        # The answers of notify come before a waiting call's own.
        fake_daemon.answer = lambda r: "ok 0"
        client.end()
        assert client.refused == 2


def test_the_context_manager_leaves_the_hint_to_the_work(fake_daemon):
    with HintClient(fake_daemon.path) as client:
        with kfd_preempt.hint(client, 0.03) as nodes:
            assert nodes == 1
        assert fake_daemon.wait_for(1) == ["begin 30"]
    assert fake_daemon.closed.wait(5)
    assert fake_daemon.requests == ["begin 30"]


def test_the_context_manager_ends_the_hint_of_an_abandoned_request(fake_daemon):
    with HintClient(fake_daemon.path) as client:
        with pytest.raises(ValueError):
            with kfd_preempt.hint(client, 0.03, [0x5100]):
                raise ValueError("the request was malformed")
        assert fake_daemon.wait_for(2) == ["begin 30 0x5100", "end"]


def test_close_closes_the_connection_and_then_ebadf(fake_daemon):
    client = HintClient(fake_daemon.path)
    client.close()
    client.close()
    assert fake_daemon.closed.wait(5)
    with pytest.raises(KfdPreemptError) as e:
        client.begin(0.01)
    assert e.value.errno == errno.EBADF


@pytest.mark.parametrize(
    "within,nodes", [(0.0, None), (0.0009, None), (-1.0, None), (0.01, list(range(17)))]
)
def test_a_hint_the_daemon_would_refuse_is_einval_before_sending(fake_daemon, within, nodes):
    with HintClient(fake_daemon.path) as client:
        with pytest.raises(KfdPreemptError) as e:
            client.begin(within, nodes)
        assert e.value.errno == errno.EINVAL
        # The next request is the first the daemon hears.
        client.begin(0.001)
        assert fake_daemon.wait_for(1) == ["begin 1"]


def test_no_daemon_is_an_oserror_that_names_the_setting(tmp_path):
    with pytest.raises(KfdPreemptError) as e:
        HintClient(os.fspath(tmp_path / "absent.sock"))
    assert e.value.errno == errno.ENOENT
    assert "hint_socket" in e.value.strerror
