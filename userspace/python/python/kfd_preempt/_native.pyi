# SPDX-License-Identifier: GPL-2.0 OR MIT
# Types of the compiled half of kfd_preempt (src/*.rs in the crate
# userspace/python); the docstrings are the compiled classes' own.
from os import PathLike
from types import TracebackType
from typing import List, Optional, Sequence, Tuple, Type, Union, final

ABI_MAJOR: int
DEVICE_PATH: str
SIM_TENANT_PATH: str
MAX_LEASE: float
__all__ = [
    "ABI_MAJOR",
    "Activity",
    "BatchReport",
    "DEVICE_PATH",
    "Device",
    "HintClient",
    "HintRefused",
    "Info",
    "KfdPreemptError",
    "MAX_LEASE",
    "Outcome",
    "QueueInfo",
    "QueueRef",
    "SIM_TENANT_PATH",
    "Sample",
    "SimQueueStatus",
    "SimTenant",
    "Target",
    "kfd_processes",
]

class KfdPreemptError(OSError): ...

class HintRefused(KfdPreemptError):
    reason: str

@final
class QueueRef:
    handle: int
    gpu_id: int
    queue_id: int
    def __new__(cls, handle: int, gpu_id: int, queue_id: int) -> QueueRef: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class QueueInfo:
    handle: int
    gpu_id: int
    queue_id: int
    queue_type: str
    state: int
    state_names: List[str]
    active: bool
    owned: bool
    ring_base_address: int
    ring_size: int
    priority: int
    queue_percent: int
    gc_ip_version: int
    def queue_ref(self) -> QueueRef: ...

@final
class Outcome:
    name: str
    ok: bool
    status: int
    errno: int
    message: str

@final
class BatchReport:
    outcomes: List[Tuple[QueueRef, Outcome]]
    num_ok: int
    runlist_updates: int
    elapsed: float
    @property
    def all_succeeded(self) -> bool: ...
    def failures(self) -> List[Tuple[QueueRef, Outcome]]: ...

@final
class Info:
    abi_major: int
    abi_minor: int
    caps: int
    cap_names: List[str]
    max_batch: int
    min_preempt_interval_us: int
    max_watches: int
    min_watch_period: float

@final
class Activity:
    queue: QueueRef
    pending: bool
    gone: bool
    read_index: int
    write_index: int

@final
class Sample:
    timestamp: float
    num_pending: int
    queues: List[Activity]

@final
class Device:
    def __new__(cls, path: Optional[Union[str, PathLike[str]]] = None) -> Device: ...
    def info(self) -> Info: ...
    def attach(self, pid: int) -> Target: ...
    def attach_fd(self, fd: int, kind: str = "kfd") -> Target: ...
    def preempt(
        self,
        queues: Sequence[QueueRef],
        *,
        lease: Optional[float] = None,
        validate_only: bool = False,
        all_or_nothing: bool = False,
    ) -> BatchReport: ...
    def resume(self, queues: Sequence[QueueRef]) -> BatchReport: ...
    def watch(self, queues: Sequence[QueueRef]) -> BatchReport: ...
    def unwatch(self, queues: Sequence[QueueRef]) -> BatchReport: ...
    def sample(self) -> Sample: ...
    def arm(self, condition: str, period: float, eventfd: int, *, idle: float = 0.0) -> None: ...
    def disarm(self) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> Device: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class Target:
    handle: int
    tgid: int
    num_gpus: int
    def query(self, gpu_id: Optional[int] = None) -> List[QueueInfo]: ...
    def queue(self, gpu_id: int, queue_id: int) -> QueueRef: ...
    def freeze(self, gpu_id: Optional[int] = None) -> float: ...
    def thaw(self, gpu_id: Optional[int] = None) -> float: ...
    def detach(self) -> None: ...

@final
class HintClient:
    def __new__(cls, path: Union[str, PathLike[str]]) -> HintClient: ...
    def begin(self, within: float, nodes: Optional[Sequence[int]] = None) -> int: ...
    def notify(self, within: float, nodes: Optional[Sequence[int]] = None) -> None: ...
    def end(self) -> None: ...
    @property
    def refused(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> HintClient: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

@final
class SimQueueStatus:
    state: int
    active: bool
    retired: int
    in_flight: int

@final
class SimTenant:
    def __new__(cls) -> SimTenant: ...
    def create_queue(self, node: int, queue_type: str = "compute-aql", priority: int = 0) -> Tuple[int, int]: ...
    def destroy_queue(self, queue_id: int) -> None: ...
    def status(self, queue_id: int) -> SimQueueStatus: ...
    def fileno(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> SimTenant: ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

def kfd_processes() -> List[Tuple[int, str]]: ...
