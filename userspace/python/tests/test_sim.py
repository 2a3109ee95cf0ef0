# SPDX-License-Identifier: GPL-2.0 OR MIT
"""The scheduler API against the module's simulated nodes (the VM, with
sim_nodes=N): this process is its own tenant, attached through the device,
its queues preempted, resumed, frozen and watched."""

from __future__ import annotations

import errno
import os

import pytest

from kfd_preempt import Device, KfdPreemptError, QueueRef, SimTenant


@pytest.fixture
def attached(device: Device, tenant: SimTenant):
    """Two queues of this test's tenant on simulated node 0, attached."""
    queues = [tenant.create_queue(0) for _ in range(2)]
    target = device.attach_fd(tenant.fileno(), "sim")
    yield target, [target.queue(gpu_id, qid) for qid, gpu_id in queues]


def test_info_speaks_abi_1_with_the_activity_capability(device):
    info = device.info()
    assert info.abi_major == 1 and info.abi_minor >= 2
    assert info.max_batch > 0
    assert "activity" in info.cap_names and "sim" in info.cap_names


def test_attach_finds_the_queues(attached):
    target, refs = attached
    assert target.tgid == os.getpid() and target.num_gpus >= 1
    found = {q.queue_ref() for q in target.query()}
    assert set(refs) <= found
    for q in target.query(refs[0].gpu_id):
        assert q.active and not q.owned and q.queue_type == "compute-aql"


def test_preempt_is_one_runlist_update_and_resume_puts_them_back(device, tenant, attached):
    target, refs = attached
    report = device.preempt(refs, lease=10.0)
    assert report.all_succeeded and report.num_ok == 2
    assert report.runlist_updates == 1
    assert [o.name for _, o in report.outcomes] == ["done", "done"]
    for q in target.query(refs[0].gpu_id):
        if q.queue_ref() in refs:
            assert q.owned and not q.active
    for ref in refs:
        assert not tenant.status(ref.queue_id).active
    again = device.preempt(refs)
    assert [o.name for _, o in again.outcomes] == ["already", "already"]
    back = device.resume(refs)
    assert back.all_succeeded
    for ref in refs:
        assert tenant.status(ref.queue_id).active


def test_a_bad_entry_fails_alone_with_its_errno(device, tenant, attached):
    target, refs = attached
    # An id below the module's limit (1024) that names no queue.
    bogus = QueueRef(target.handle, refs[0].gpu_id, 1000)
    report = device.preempt([refs[0], bogus])
    failures = report.failures()
    assert [r for r, _ in failures] == [bogus]
    assert failures[0][1].errno == errno.ENOENT and failures[0][1].name == "failed"
    assert report.num_ok == 1
    device.resume([refs[0]])
    assert tenant.status(refs[0].queue_id).active


def test_all_or_nothing_changes_nothing_when_one_fails(device, tenant, attached):
    target, refs = attached
    bogus = QueueRef(target.handle, refs[0].gpu_id, 1000)
    report = device.preempt([refs[0], bogus], all_or_nothing=True)
    assert report.num_ok == 0
    assert tenant.status(refs[0].queue_id).active


def test_freeze_and_thaw_the_process(device, tenant, attached):
    target, refs = attached
    assert target.freeze() >= 0.0
    assert not tenant.status(refs[0].queue_id).active
    assert target.thaw() >= 0.0
    assert tenant.status(refs[0].queue_id).active
    with pytest.raises(KfdPreemptError) as e:
        target.thaw()
    assert e.value.errno == errno.EINVAL


def test_a_queue_without_a_ring_cannot_be_watched_and_nothing_is(device, attached):
    # create_queue makes queues without AQL indices: the module has no
    # activity to read, and says so per entry (EOPNOTSUPP).
    _, refs = attached
    report = device.watch(refs)
    assert report.num_ok == 0
    assert {o.errno for _, o in report.outcomes} == {errno.EOPNOTSUPP}
    sample = device.sample()
    assert sample.num_pending == 0 and sample.queues == []
    device.disarm()


def test_closing_the_device_puts_the_queues_back(tenant, attached):
    # A second owner: its close must undo its own preemption.
    _, refs = attached
    other = Device()
    target = other.attach_fd(tenant.fileno(), "sim")
    mine = [target.queue(r.gpu_id, r.queue_id) for r in refs]
    assert other.preempt(mine).all_succeeded
    assert not tenant.status(refs[0].queue_id).active
    other.close()
    assert tenant.status(refs[0].queue_id).active
    with pytest.raises(KfdPreemptError) as e:
        target.query()
    assert e.value.errno == errno.EBADF


def test_a_detached_target_refuses_and_the_handle_is_gone(device, attached):
    target, refs = attached
    target.detach()
    with pytest.raises(KfdPreemptError) as e:
        target.query()
    assert e.value.errno == errno.EINVAL
    report = device.preempt(refs)
    assert report.num_ok == 0


def test_the_last_target_of_a_process_detaches_it(device, tenant, attached):
    target, refs = attached
    again = device.attach_fd(tenant.fileno(), "sim")
    assert again.handle == target.handle
    assert device.preempt(refs).all_succeeded
    # Releasing one of two targets of the process undoes nothing.
    again.detach()
    assert not tenant.status(refs[0].queue_id).active
    assert {q.queue_ref() for q in target.query()} >= set(refs)
    # The last one detaches: what this owner held is resumed.
    target.detach()
    assert tenant.status(refs[0].queue_id).active
