//! An attached process, detached when dropped.

use std::{fmt, time::Duration};

use crate::{Device, Error, Handle, QueueInfo, QueueRef};

/// A process attached to a [`Device`]: it can be queried, frozen and have
/// its queues preempted. Dropping it detaches, which resumes and thaws
/// everything this owner did to it.
///
/// # Invariants
///
/// `handle` was returned by ATTACH on `dev` and has not been detached.
///
/// ```no_run
/// use kfd_preempt::Device;
///
/// let dev = Device::open()?;
/// {
///     let tenant = dev.attach(4242)?;
///     tenant.freeze()?;
///     // ... the latency-critical job runs ...
/// } // detached here: the tenant is thawed
/// # Ok::<(), kfd_preempt::Error>(())
/// ```
pub struct Target<'d> {
    dev: &'d Device,
    handle: Handle,
    tgid: i32,
    num_gpus: u32,
}

impl<'d> Target<'d> {
    pub(crate) fn new(dev: &'d Device, handle: Handle, tgid: i32, num_gpus: u32) -> Self {
        // INVARIANT: the callers pass what ATTACH on `dev` just returned.
        Target {
            dev,
            handle,
            tgid,
            num_gpus,
        }
    }

    /// The attachment handle, for [`QueueRef`]s and [`Device`] calls.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let t = dev.attach(4242)?;
    /// let first = kfd_preempt::QueueRef { handle: t.handle(), gpu_id: 0x5100, queue_id: 0 };
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn handle(&self) -> Handle {
        self.handle
    }

    /// The target's thread-group id in the caller's pid namespace.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// assert_eq!(dev.attach(4242)?.tgid(), 4242);
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn tgid(&self) -> i32 {
        self.tgid
    }

    /// How many GPU nodes the target has KFD state on.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// println!("{} GPU(s)", dev.attach(4242)?.num_gpus());
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn num_gpus(&self) -> u32 {
        self.num_gpus
    }

    /// Lists the target's queues on every node.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// for q in dev.attach(4242)?.query()? {
    ///     println!("{} {} {}", q.queue_id, q.queue_type, q.state);
    /// }
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn query(&self) -> Result<Vec<QueueInfo>, Error> {
        self.dev.query(self.handle, None)
    }

    /// Lists the target's queues on the node `gpu_id`.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let on_first_gpu = dev.attach(4242)?.query_gpu(0x5100)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn query_gpu(&self, gpu_id: u32) -> Result<Vec<QueueInfo>, Error> {
        self.dev.query(self.handle, Some(gpu_id))
    }

    /// The reference a batch names one of the target's queues by.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let t = dev.attach(4242)?;
    /// dev.preempt(&[t.queue(0x5100, 0)], &Default::default())?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn queue(&self, gpu_id: u32, queue_id: u32) -> QueueRef {
        QueueRef {
            handle: self.handle,
            gpu_id,
            queue_id,
        }
    }

    /// Freezes the whole process on every node: the tenant cannot undo it
    /// and queues it creates meanwhile stay off the GPU. Nests. Returns the
    /// hardware time.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let t = dev.attach(4242)?;
    /// let took = t.freeze()?;
    /// t.thaw()?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn freeze(&self) -> Result<Duration, Error> {
        self.dev.freeze(self.handle, None, false)
    }

    /// Undoes one [`freeze`](Self::freeze).
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// # let t = dev.attach(4242)?;
    /// t.thaw()?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn thaw(&self) -> Result<Duration, Error> {
        self.dev.freeze(self.handle, None, true)
    }

    /// Detaches now, reporting any error (dropping detaches silently).
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// dev.attach(4242)?.detach()?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn detach(self) -> Result<(), Error> {
        let r = self.dev.detach(self.handle);
        std::mem::forget(self);
        r
    }

    /// Keeps the attachment without detaching on drop; it lives until
    /// [`Device::detach`] or until the device is closed.
    ///
    /// ```no_run
    /// # let dev = kfd_preempt::Device::open()?;
    /// let h = dev.attach(4242)?.into_handle();
    /// let queues = dev.query(h, None)?;
    /// # Ok::<(), kfd_preempt::Error>(())
    /// ```
    pub fn into_handle(self) -> Handle {
        let h = self.handle;
        std::mem::forget(self);
        h
    }
}

impl fmt::Debug for Target<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("handle", &self.handle)
            .field("tgid", &self.tgid)
            .field("num_gpus", &self.num_gpus)
            .finish()
    }
}

impl Drop for Target<'_> {
    fn drop(&mut self) {
        // Nothing useful can be done with an error here: the target exited
        // (its attachment is gone with it) or the handle is unknown. Close
        // of the device undoes everything anyway.
        let _ = self.dev.detach(self.handle);
    }
}
