//! What QUERY reports about a queue.

use std::fmt;

use crate::{uapi, Handle};

/// The queue's type, as `KFD_IOC_QUEUE_TYPE_*` numbers it.
///
/// ```
/// use kfd_preempt::QueueType;
///
/// assert_eq!(QueueType::from(2), QueueType::ComputeAql);
/// assert_eq!(QueueType::ComputeAql.to_string(), "compute-aql");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueType {
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE`.
    Compute,
    /// `KFD_IOC_QUEUE_TYPE_SDMA`.
    Sdma,
    /// `KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`, what HIP streams use.
    ComputeAql,
    /// `KFD_IOC_QUEUE_TYPE_SDMA_XGMI`.
    SdmaXgmi,
    /// `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID`.
    SdmaByEngineId,
    /// A number this crate does not know.
    Other(u32),
}

impl From<u32> for QueueType {
    fn from(v: u32) -> Self {
        match v {
            0 => QueueType::Compute,
            1 => QueueType::Sdma,
            2 => QueueType::ComputeAql,
            3 => QueueType::SdmaXgmi,
            4 => QueueType::SdmaByEngineId,
            v => QueueType::Other(v),
        }
    }
}

impl From<QueueType> for u32 {
    fn from(t: QueueType) -> u32 {
        match t {
            QueueType::Compute => 0,
            QueueType::Sdma => 1,
            QueueType::ComputeAql => 2,
            QueueType::SdmaXgmi => 3,
            QueueType::SdmaByEngineId => 4,
            QueueType::Other(v) => v,
        }
    }
}

impl fmt::Display for QueueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueType::Compute => f.write_str("compute"),
            QueueType::Sdma => f.write_str("sdma"),
            QueueType::ComputeAql => f.write_str("compute-aql"),
            QueueType::SdmaXgmi => f.write_str("sdma-xgmi"),
            QueueType::SdmaByEngineId => f.write_str("sdma-eng"),
            QueueType::Other(v) => write!(f, "type-{v}"),
        }
    }
}

/// The `KFDP_QS_*` state bits of a queue.
///
/// ```
/// use kfd_preempt::QueueState;
///
/// let s = QueueState(QueueState::SUSPENDED | QueueState::OWNED);
/// assert!(s.is_owned() && !s.is_active());
/// assert_eq!(s.to_string(), "suspended,owned");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QueueState(pub u32);

impl QueueState {
    /// In the runlist (or added to MES).
    pub const ACTIVE: u32 = uapi::KFDP_QS_ACTIVE;
    /// Suspended, by anyone.
    pub const SUSPENDED: u32 = uapi::KFDP_QS_SUSPENDED;
    /// Preempted by this owner.
    pub const OWNED: u32 = uapi::KFDP_QS_OWNED;
    /// Preempted by another owner.
    pub const OWNED_OTHER: u32 = uapi::KFDP_QS_OWNED_OTHER;
    /// The process's queues are evicted.
    pub const EVICTED: u32 = uapi::KFDP_QS_EVICTED;
    /// Frozen by a kfd_preempt owner.
    pub const FROZEN: u32 = uapi::KFDP_QS_FROZEN;
    /// Being destroyed.
    pub const BEING_DESTROYED: u32 = uapi::KFDP_QS_BEING_DESTROYED;
    /// The queue or its node was reset.
    pub const RESET: u32 = uapi::KFDP_QS_RESET;
    /// Uses GWS.
    pub const GWS: u32 = uapi::KFDP_QS_GWS;
    /// `EC_QUEUE_NEW` is still set.
    pub const NEW: u32 = uapi::KFDP_QS_NEW;
    /// The process has the KFD debugger enabled.
    pub const DEBUGGED: u32 = uapi::KFDP_QS_DEBUGGED;

    const NAMES: [(u32, &'static str); 11] = [
        (Self::ACTIVE, "active"),
        (Self::SUSPENDED, "suspended"),
        (Self::OWNED, "owned"),
        (Self::OWNED_OTHER, "owned-other"),
        (Self::EVICTED, "evicted"),
        (Self::FROZEN, "frozen"),
        (Self::BEING_DESTROYED, "being-destroyed"),
        (Self::RESET, "reset"),
        (Self::GWS, "gws"),
        (Self::NEW, "new"),
        (Self::DEBUGGED, "debugged"),
    ];

    /// Whether the queue is on the hardware.
    ///
    /// ```
    /// use kfd_preempt::QueueState;
    /// assert!(QueueState(QueueState::ACTIVE).is_active());
    /// ```
    pub fn is_active(self) -> bool {
        self.0 & Self::ACTIVE != 0
    }

    /// Whether this owner holds a preemption of the queue.
    ///
    /// ```
    /// use kfd_preempt::QueueState;
    /// assert!(!QueueState(QueueState::OWNED_OTHER).is_owned());
    /// ```
    pub fn is_owned(self) -> bool {
        self.0 & Self::OWNED != 0
    }

    /// The names of the bits set, in ABI order; unknown bits as `0x..`.
    ///
    /// ```
    /// use kfd_preempt::QueueState;
    /// assert_eq!(QueueState(QueueState::FROZEN | QueueState::EVICTED).names(), ["evicted", "frozen"]);
    /// ```
    pub fn names(self) -> Vec<String> {
        crate::bits::names(
            self.0.into(),
            &Self::NAMES.map(|(bit, name)| (u64::from(bit), name)),
        )
    }
}

impl fmt::Display for QueueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("inactive")
        } else {
            f.write_str(&names.join(","))
        }
    }
}

/// One queue of an attached process, as `KFDP_IOC_QUERY` describes it.
///
/// ```no_run
/// # fn main() -> Result<(), kfd_preempt::Error> {
/// let dev = kfd_preempt::Device::open()?;
/// let target = dev.attach(1234)?;
/// for q in target.query()? {
///     println!("gpu {:#x} queue {} ring {:#x}: {}", q.gpu_id, q.queue_id, q.ring_base_address, q.state);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueInfo {
    /// The attachment it was queried through.
    pub handle: Handle,
    /// Topology `gpu_id` of its node.
    pub gpu_id: u32,
    /// Queue id within the process (amdkfd's `queue_id`).
    pub queue_id: u32,
    /// Queue type.
    pub queue_type: QueueType,
    /// State bits.
    pub state: QueueState,
    /// The ring's address in the tenant, equal to `hsa_queue_t::base_address`.
    pub ring_base_address: u64,
    /// Ring size in bytes.
    pub ring_size: u64,
    /// Address of the read pointer in the tenant.
    pub read_pointer_address: u64,
    /// Address of the write pointer in the tenant.
    pub write_pointer_address: u64,
    /// CWSR save area address in the tenant.
    pub ctx_save_restore_address: u64,
    /// CWSR save area size.
    pub ctx_save_restore_size: u32,
    /// Doorbell index.
    pub doorbell_id: u32,
    /// Doorbell offset in the process's doorbell page.
    pub doorbell_off: u32,
    /// amdkfd queue priority (0..15).
    pub priority: u32,
    /// amdkfd queue percentage.
    pub queue_percent: u32,
    /// GC IP version of the node, e.g. `0x090403` for MI300.
    pub gc_ip_version: u32,
}

impl QueueInfo {
    pub(crate) fn from_raw(handle: Handle, q: &uapi::kfdp_queue_info) -> Self {
        QueueInfo {
            handle,
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
            queue_type: q.queue_type.into(),
            state: QueueState(q.state),
            ring_base_address: q.ring_base_address,
            ring_size: q.ring_size,
            read_pointer_address: q.read_pointer_address,
            write_pointer_address: q.write_pointer_address,
            ctx_save_restore_address: q.ctx_save_restore_address,
            ctx_save_restore_size: q.ctx_save_restore_size,
            doorbell_id: q.doorbell_id,
            doorbell_off: q.doorbell_off,
            priority: q.priority,
            queue_percent: q.queue_percent,
            gc_ip_version: q.gc_ip_version,
        }
    }

    /// The reference a batch names this queue by.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let refs: Vec<_> = dev.attach(4242)?.query()?.iter().map(|q| q.queue_ref()).collect();
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn queue_ref(&self) -> crate::QueueRef {
        crate::QueueRef {
            handle: self.handle,
            gpu_id: self.gpu_id,
            queue_id: self.queue_id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_type_round_trips() {
        for v in 0..7 {
            assert_eq!(u32::from(QueueType::from(v)), v);
        }
        assert_eq!(QueueType::from(9).to_string(), "type-9");
    }

    #[test]
    fn state_names_known_unknown_and_none() {
        assert_eq!(QueueState(0).to_string(), "inactive");
        assert_eq!(
            QueueState(QueueState::ACTIVE | QueueState::DEBUGGED).to_string(),
            "active,debugged"
        );
        assert_eq!(QueueState(1 << 20).names(), ["0x100000"]);
    }

    #[test]
    fn from_raw_keeps_every_field() {
        let raw = uapi::kfdp_queue_info {
            gpu_id: 0x5100,
            queue_id: 3,
            queue_type: 2,
            state: QueueState::ACTIVE,
            ring_base_address: 0x1000,
            ring_size: 0x2000,
            read_pointer_address: 0x3000,
            write_pointer_address: 0x4000,
            ctx_save_restore_address: 0x5000,
            ctx_save_restore_size: 6,
            doorbell_id: 7,
            doorbell_off: 8,
            priority: 9,
            queue_percent: 10,
            gc_ip_version: 0x090403,
            ..Default::default()
        };
        let q = QueueInfo::from_raw(Handle(4), &raw);
        assert_eq!(
            (q.handle, q.gpu_id, q.queue_id, q.queue_type),
            (Handle(4), 0x5100, 3, QueueType::ComputeAql)
        );
        assert_eq!(
            (
                q.ring_base_address,
                q.ring_size,
                q.read_pointer_address,
                q.write_pointer_address,
                q.ctx_save_restore_address
            ),
            (0x1000, 0x2000, 0x3000, 0x4000, 0x5000)
        );
        assert_eq!(
            (
                q.ctx_save_restore_size,
                q.doorbell_id,
                q.doorbell_off,
                q.priority,
                q.queue_percent,
                q.gc_ip_version
            ),
            (6, 7, 8, 9, 10, 0x090403)
        );
        assert_eq!(
            q.queue_ref(),
            crate::QueueRef {
                handle: Handle(4),
                gpu_id: 0x5100,
                queue_id: 3
            }
        );
    }
}
