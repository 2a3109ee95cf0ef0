# SPDX-License-Identifier: GPL-2.0 OR MIT
"""What the package does without the module: its types, and the errors of
bad arguments and missing devices (each an OSError with its errno)."""

from __future__ import annotations

import errno

import pytest

import kfd_preempt
from kfd_preempt import Device, KfdPreemptError, QueueRef


def test_errors_are_oserrors():
    assert issubclass(KfdPreemptError, OSError)
    assert issubclass(kfd_preempt.HintRefused, KfdPreemptError)


def test_a_missing_device_says_load_the_module():
    with pytest.raises(KfdPreemptError) as e:
        Device("/nonexistent/kfd_preempt")
    assert e.value.errno == errno.ENODEV
    assert "load the module" in e.value.strerror


def test_a_device_that_is_not_kfd_preempt_does_not_answer_info():
    # /dev/null opens, but its ioctls fail: the crate's ENOTTY.
    with Device("/dev/null") as dev:
        with pytest.raises(KfdPreemptError) as e:
            dev.info()
        assert e.value.errno == errno.ENOTTY


@pytest.mark.parametrize("lease", [-1.0, float("nan"), float("inf")])
def test_a_lease_that_is_not_a_duration_is_einval(lease):
    with Device("/dev/null") as dev:
        with pytest.raises(KfdPreemptError) as e:
            dev.preempt([QueueRef(1, 2, 3)], lease=lease)
        assert e.value.errno == errno.EINVAL
        assert "lease" in e.value.strerror


def test_arm_takes_only_its_two_conditions():
    with Device("/dev/null") as dev:
        with pytest.raises(KfdPreemptError) as e:
            dev.arm("sometimes", 0.001, 0)
        assert e.value.errno == errno.EINVAL
        with pytest.raises(KfdPreemptError) as e:
            dev.arm("any-busy", 0.001, -1)
        assert e.value.errno == errno.EINVAL


def test_attach_fd_takes_only_kfd_or_sim():
    with Device("/dev/null") as dev:
        with pytest.raises(KfdPreemptError) as e:
            dev.attach_fd(0, "gpu")
        assert e.value.errno == errno.EINVAL


def test_a_closed_device_is_ebadf_and_closes_twice():
    dev = Device("/dev/null")
    assert not dev.closed
    dev.close()
    dev.close()
    assert dev.closed
    with pytest.raises(KfdPreemptError) as e:
        dev.sample()
    assert e.value.errno == errno.EBADF


def test_queue_refs_compare_and_hash_by_value():
    a, b = QueueRef(1, 0x5100, 3), QueueRef(1, 0x5100, 3)
    assert a == b and hash(a) == hash(b)
    assert a != QueueRef(1, 0x5100, 4)
    assert len({a, b, QueueRef(2, 0x5100, 3)}) == 2
    assert (a.handle, a.gpu_id, a.queue_id) == (1, 0x5100, 3)
    assert "queue_id=3" in repr(a)


def test_queue_ref_fields_are_unsigned_32_bit():
    with pytest.raises(OverflowError):
        QueueRef(-1, 0, 0)
    with pytest.raises(OverflowError):
        QueueRef(0, 1 << 32, 0)


def test_constants_match_the_abi():
    assert kfd_preempt.DEVICE_PATH == "/dev/kfd_preempt"
    assert kfd_preempt.ABI_MAJOR == 1
    assert kfd_preempt.MAX_LEASE == 86400.0


def test_kfd_processes_lists_pairs():
    for pid, kind in kfd_preempt.kfd_processes():
        assert pid > 0 and kind in ("kfd", "sim")
