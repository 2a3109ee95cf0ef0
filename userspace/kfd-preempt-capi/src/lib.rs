//! C ABI of the `kfd-preempt` crate, for C and C++ schedulers: built as
//! `libkfdpreempt.so` and `libkfdpreempt.a`, declared in the generated
//! `include/kfdpreempt.h`.
//!
//! Conventions: functions return 0 or a negative errno; after a failure,
//! [`kfdpreempt_last_error`] returns the message of the crate's typed error
//! (what happened and what to do) for the calling thread. Attachments are
//! plain handles; closing the device undoes everything done through it.
//!
//! Stability: the library's soname is `libkfdpreempt.so.1`
//! ([`KFDPREEMPT_ABI_VERSION`]); within it, functions keep their
//! signatures, and structs only grow where they say so
//! ([`kfdpreempt_queue_info`] has reserved room, and [`kfdpreempt_query`]
//! takes the caller's `sizeof` of it).
//!
//! ```c
//! kfdpreempt_device *dev;
//! uint32_t h;
//! if (kfdpreempt_open(&dev) || kfdpreempt_attach_pid(dev, pid, &h)) {
//!         fprintf(stderr, "%s\n", kfdpreempt_last_error());
//!         return 1;
//! }
//! ```

#![allow(non_camel_case_types)]

use std::{
    cell::RefCell,
    ffi::{c_char, CString},
    ptr,
    time::Duration,
};

use kfd_preempt::{BatchOptions, BatchReport, Device, Error, Handle, QueueRef};

mod hint;
pub use hint::*;

/// The major version of this C ABI: the `.so.N` of the library's soname.
/// A change that breaks a caller built against it takes a new N.
pub const KFDPREEMPT_ABI_VERSION: u32 = 1;

/// The size of [`kfdpreempt_queue_info`] up to and including
/// `gc_ip_version`: the least `entry_size` [`kfdpreempt_query`] accepts.
pub const KFDPREEMPT_QUEUE_INFO_MIN_SIZE: usize = 48;

/// An open `/dev/kfd_preempt` (one owner). Opaque to C.
pub struct kfdpreempt_device {
    dev: Device,
}

/// One entry of a PREEMPT or RESUME batch: `handle`, `gpu_id` and
/// `queue_id` in, `status` out (0 done, 1 already, 2 deferred, 3 resumed
/// externally, or a negative errno, as `KFDP_R_*` in the uapi header).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kfdpreempt_queue {
    /// Attachment handle from [`kfdpreempt_attach_pid`].
    pub handle: u32,
    /// Topology gpu_id of the queue's node.
    pub gpu_id: u32,
    /// Queue id within the process.
    pub queue_id: u32,
    /// Outcome, written by the batch.
    pub status: i32,
}

/// What a batch did as a whole.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kfdpreempt_batch_result {
    /// Entries with status 0.
    pub num_ok: u32,
    /// HWS runlist updates or MES calls issued.
    pub runlist_updates: u32,
    /// Time the module spent in the hardware phase, in nanoseconds.
    pub elapsed_ns: u64,
}

/// One queue as [`kfdpreempt_query`] describes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct kfdpreempt_queue_info {
    /// Topology gpu_id of its node.
    pub gpu_id: u32,
    /// Queue id within the process.
    pub queue_id: u32,
    /// `KFD_IOC_QUEUE_TYPE_*`.
    pub queue_type: u32,
    /// `KFDP_QS_*` bits.
    pub state: u32,
    /// The ring's address in the tenant (`hsa_queue_t::base_address`).
    pub ring_base_address: u64,
    /// Ring size in bytes.
    pub ring_size: u64,
    /// Doorbell index.
    pub doorbell_id: u32,
    /// Doorbell offset.
    pub doorbell_off: u32,
    /// Queue priority.
    pub priority: u32,
    /// GC IP version of the node (0x090403 for MI300).
    pub gc_ip_version: u32,
    /// Zero: room for fields a later version adds (a caller built against
    /// this header passes `sizeof` and gets them zeroed).
    pub reserved: [u64; 4],
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as this thread's last error.
fn record_error(message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|l| *l.borrow_mut() = text);
}

/// Records `e` as this thread's last error and returns its negative errno.
fn fail(e: &Error) -> i32 {
    record_error(&e.to_string());
    -e.errno()
}

fn invalid(what: &'static str) -> i32 {
    fail(&Error::InvalidArgument(what))
}

/// The message of this thread's last failed call ("" if none). The string
/// stays valid until the thread's next failing call.
#[no_mangle]
pub extern "C" fn kfdpreempt_last_error() -> *const c_char {
    LAST_ERROR.with(|l| l.borrow().as_ptr())
}

/// Opens `/dev/kfd_preempt` (needs `CAP_SYS_NICE`) into `*out`.
///
/// # Safety
///
/// `out` must be null or valid for writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_open(out: *mut *mut kfdpreempt_device) -> i32 {
    if out.is_null() {
        return invalid("out is NULL");
    }
    match Device::open().and_then(|dev| dev.info().map(|_| dev)) {
        Ok(dev) => {
            let boxed = Box::into_raw(Box::new(kfdpreempt_device { dev }));
            // SAFETY: `out` is non-null and, by the caller's contract, valid
            // for writes.
            unsafe { *out = boxed };
            0
        }
        Err(e) => fail(&e),
    }
}

/// Closes the device: every preemption, freeze and attachment made through
/// it is undone by the kernel. `dev` may be null.
///
/// # Safety
///
/// `dev` must be null or a pointer from [`kfdpreempt_open`] not closed yet.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_close(dev: *mut kfdpreempt_device) {
    if !dev.is_null() {
        // SAFETY: by the caller's contract `dev` came from Box::into_raw in
        // kfdpreempt_open and is released exactly once.
        drop(unsafe { Box::from_raw(dev) });
    }
}

/// The device behind `dev`, or an error for a null pointer.
///
/// # Safety
///
/// `dev` must be null or a live pointer from [`kfdpreempt_open`].
unsafe fn device<'a>(dev: *const kfdpreempt_device) -> Result<&'a Device, i32> {
    // SAFETY: by the caller's contract a non-null `dev` is live.
    unsafe { dev.as_ref() }
        .map(|d| &d.dev)
        .ok_or_else(|| invalid("dev is NULL"))
}

/// Attaches process `pid` (taking its `/dev/kfd` with `pidfd_getfd(2)`, or
/// by pid where the module allows it) and writes its handle to `*handle`.
///
/// # Safety
///
/// `dev` must be null or live; `handle` null or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_attach_pid(
    dev: *const kfdpreempt_device,
    pid: i32,
    handle: *mut u32,
) -> i32 {
    // SAFETY: forwarded caller contract.
    let dev = match unsafe { device(dev) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    if handle.is_null() {
        return invalid("handle is NULL");
    }
    match dev.attach(pid) {
        Ok(t) => {
            // SAFETY: `handle` is non-null and valid for writes by contract.
            unsafe { *handle = t.into_handle().0 };
            0
        }
        Err(e) => fail(&e),
    }
}

/// Detaches `handle`, resuming and thawing what this owner did to it.
///
/// # Safety
///
/// `dev` must be null or live.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_detach(dev: *const kfdpreempt_device, handle: u32) -> i32 {
    // SAFETY: forwarded caller contract.
    match unsafe { device(dev) }.map(|d| d.detach(Handle(handle))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => fail(&e),
        Err(e) => e,
    }
}

/// Describes the queues of `handle` on `gpu_id` (0: all nodes) into up to
/// `capacity` entries of `out`, each `entry_size` bytes apart (pass
/// `sizeof(kfdpreempt_queue_info)`: a caller built against an older,
/// shorter version still gets its fields, and a newer, longer one gets the
/// fields it does not know about zeroed); `*num_queues` gets how many there
/// are (may exceed `capacity`). `entry_size` must be at least
/// `KFDPREEMPT_QUEUE_INFO_MIN_SIZE`.
///
/// # Safety
///
/// `dev` must be null or live; `out` null (only with `capacity` 0) or
/// valid for writing `capacity * entry_size` bytes; `num_queues` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_query(
    dev: *const kfdpreempt_device,
    handle: u32,
    gpu_id: u32,
    out: *mut kfdpreempt_queue_info,
    entry_size: usize,
    capacity: usize,
    num_queues: *mut usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    let dev = match unsafe { device(dev) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    if num_queues.is_null() || (out.is_null() && capacity > 0) {
        return invalid("num_queues is NULL, or out is NULL with a capacity");
    }
    if capacity > 0 && entry_size < KFDPREEMPT_QUEUE_INFO_MIN_SIZE {
        return invalid("entry_size is less than KFDPREEMPT_QUEUE_INFO_MIN_SIZE");
    }
    if capacity.checked_mul(entry_size).is_none() {
        return invalid("capacity * entry_size overflows");
    }
    let gpu = (gpu_id != 0).then_some(gpu_id);
    let queues = match dev.query(Handle(handle), gpu) {
        Ok(q) => q,
        Err(e) => return fail(&e),
    };
    let size = std::mem::size_of::<kfdpreempt_queue_info>();
    for (i, q) in queues.iter().take(capacity).enumerate() {
        let info = kfdpreempt_queue_info {
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
            queue_type: q.queue_type.into(),
            state: q.state.0,
            ring_base_address: q.ring_base_address,
            ring_size: q.ring_size,
            doorbell_id: q.doorbell_id,
            doorbell_off: q.doorbell_off,
            priority: q.priority,
            gc_ip_version: q.gc_ip_version,
            reserved: [0; 4],
        };
        // SAFETY: `i < capacity`, so entry `i` lies within the
        // `capacity * entry_size` writable bytes at `out` (no overflow,
        // checked above); the copy writes `min(entry_size, size)` bytes of
        // it and zeroes the rest, from a local `info` that cannot overlap.
        unsafe {
            let dst = out.cast::<u8>().add(i * entry_size);
            ptr::copy_nonoverlapping(ptr::from_ref(&info).cast::<u8>(), dst, entry_size.min(size));
            if entry_size > size {
                ptr::write_bytes(dst.add(size), 0, entry_size - size);
            }
        }
    }
    // SAFETY: `num_queues` is non-null and writable by contract.
    unsafe { *num_queues = queues.len() };
    0
}

/// Flags of [`kfdpreempt_preempt`]/[`kfdpreempt_resume`]: check every
/// entry, change nothing.
pub const KFDPREEMPT_VALIDATE_ONLY: u32 = 1;
/// Change nothing if any entry would fail.
pub const KFDPREEMPT_ALL_OR_NOTHING: u32 = 2;

/// The entries of a C batch, or an error code.
///
/// # Safety
///
/// `queues` must be null (only with `n` 0) or valid for reading `n` entries.
unsafe fn entries<'a>(
    queues: *mut kfdpreempt_queue,
    n: usize,
) -> Result<&'a mut [kfdpreempt_queue], i32> {
    if n == 0 {
        return Ok(&mut []);
    }
    if queues.is_null() {
        return Err(invalid("queues is NULL"));
    }
    // SAFETY: non-null and valid for `n` entries by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(queues, n) })
}

fn options(flags: u32, lease_ms: u32) -> Result<BatchOptions, i32> {
    if flags & !(KFDPREEMPT_VALIDATE_ONLY | KFDPREEMPT_ALL_OR_NOTHING) != 0 {
        return Err(invalid("unknown flag bits"));
    }
    Ok(BatchOptions {
        lease: (lease_ms != 0).then(|| Duration::from_millis(lease_ms.into())),
        validate_only: flags & KFDPREEMPT_VALIDATE_ONLY != 0,
        all_or_nothing: flags & KFDPREEMPT_ALL_OR_NOTHING != 0,
    })
}

/// Writes each entry's status and the batch's totals back to C.
///
/// # Safety
///
/// `result` must be null or valid for writing.
unsafe fn report_back(
    report: &BatchReport,
    statuses: &[i32],
    queues: &mut [kfdpreempt_queue],
    result: *mut kfdpreempt_batch_result,
) {
    for (q, s) in queues.iter_mut().zip(statuses) {
        q.status = *s;
    }
    if !result.is_null() {
        let r = kfdpreempt_batch_result {
            num_ok: report.num_ok,
            runlist_updates: report.runlist_updates,
            elapsed_ns: u64::try_from(report.elapsed.as_nanos()).unwrap_or(u64::MAX),
        };
        // SAFETY: non-null and writable by the caller's contract.
        unsafe { *result = r };
    }
}

/// Common body of preempt and resume.
///
/// # Safety
///
/// As [`kfdpreempt_preempt`].
unsafe fn batch(
    dev: *const kfdpreempt_device,
    queues: *mut kfdpreempt_queue,
    n: usize,
    flags: u32,
    lease_ms: u32,
    resume: bool,
    result: *mut kfdpreempt_batch_result,
) -> i32 {
    // SAFETY: forwarded caller contract.
    let (dev, entries) = match unsafe { device(dev) }.and_then(|d| {
        // SAFETY: forwarded caller contract.
        unsafe { entries(queues, n) }.map(|e| (d, e))
    }) {
        Ok(x) => x,
        Err(e) => return e,
    };
    let opts = match options(flags, lease_ms) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let refs: Vec<QueueRef> = entries
        .iter()
        .map(|q| QueueRef {
            handle: Handle(q.handle),
            gpu_id: q.gpu_id,
            queue_id: q.queue_id,
        })
        .collect();
    let r = if resume {
        dev.resume_with(&refs, &opts)
    } else {
        dev.preempt(&refs, &opts)
    };
    match r {
        Ok(report) => {
            let statuses: Vec<i32> = report.outcomes.iter().map(|(_, o)| o.status()).collect();
            // SAFETY: forwarded caller contract for `result`.
            unsafe { report_back(&report, &statuses, entries, result) };
            0
        }
        Err(e) => fail(&e),
    }
}

/// Preempts the `n` queues of `queues` in one call (one runlist update per
/// HWS node), writing each entry's status and, if `result` is not null, the
/// totals. `flags`: `KFDPREEMPT_VALIDATE_ONLY`, `KFDPREEMPT_ALL_OR_NOTHING`
/// (in the same place as [`kfdpreempt_resume`]'s). `lease_ms` non-zero: the
/// module resumes them after that long. Returns 0 even if entries failed:
/// check each status.
///
/// # Safety
///
/// `dev` must be null or live; `queues` null (only with `n` 0) or valid
/// for reading and writing `n` entries; `result` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_preempt(
    dev: *const kfdpreempt_device,
    queues: *mut kfdpreempt_queue,
    n: usize,
    flags: u32,
    lease_ms: u32,
    result: *mut kfdpreempt_batch_result,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { batch(dev, queues, n, flags, lease_ms, false, result) }
}

/// Resumes the `n` queues of `queues` in one call; as
/// [`kfdpreempt_preempt`] without a lease.
///
/// # Safety
///
/// As [`kfdpreempt_preempt`].
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_resume(
    dev: *const kfdpreempt_device,
    queues: *mut kfdpreempt_queue,
    n: usize,
    flags: u32,
    result: *mut kfdpreempt_batch_result,
) -> i32 {
    // SAFETY: forwarded caller contract.
    unsafe { batch(dev, queues, n, flags, 0, true, result) }
}

/// Freezes (`thaw` 0) or thaws (`thaw` 1) `handle` on `gpu_id` (0: all its
/// nodes); if `elapsed_ns` is not null, writes the time the module spent
/// in the hardware phase there (as [`kfdpreempt_batch_result`] does for a
/// batch).
///
/// # Safety
///
/// `dev` must be null or live; `elapsed_ns` null or writable.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_freeze(
    dev: *const kfdpreempt_device,
    handle: u32,
    gpu_id: u32,
    thaw: i32,
    elapsed_ns: *mut u64,
) -> i32 {
    // SAFETY: forwarded caller contract.
    let dev = match unsafe { device(dev) } {
        Ok(d) => d,
        Err(e) => return e,
    };
    match dev.freeze(Handle(handle), (gpu_id != 0).then_some(gpu_id), thaw != 0) {
        Ok(took) => {
            if !elapsed_ns.is_null() {
                // SAFETY: non-null and writable by the caller's contract.
                unsafe { *elapsed_ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX) };
            }
            0
        }
        Err(e) => fail(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_error() -> String {
        // SAFETY: kfdpreempt_last_error returns a valid C string owned by
        // this thread.
        unsafe { CStr::from_ptr(kfdpreempt_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn null_arguments_are_einval_with_a_message() {
        // SAFETY: null pointers are allowed by every function's contract.
        unsafe {
            assert_eq!(kfdpreempt_open(ptr::null_mut()), -22);
            assert!(last_error().contains("out is NULL"));
            let mut h = 0;
            assert_eq!(kfdpreempt_attach_pid(ptr::null(), 1, &mut h), -22);
            assert!(last_error().contains("dev is NULL"));
            assert_eq!(kfdpreempt_detach(ptr::null(), 1), -22);
            assert_eq!(
                kfdpreempt_freeze(ptr::null(), 1, 0, 0, ptr::null_mut()),
                -22
            );
            kfdpreempt_close(ptr::null_mut());
        }
    }

    #[test]
    fn open_without_the_module_says_how_to_load_it() {
        if std::path::Path::new(kfd_preempt::DEVICE_PATH).exists() {
            return; // Only meaningful where the module is absent.
        }
        let mut dev = ptr::null_mut();
        // SAFETY: `dev` is a valid out pointer.
        assert_eq!(unsafe { kfdpreempt_open(&mut dev) }, -19); // ENODEV
        assert!(dev.is_null());
        assert!(last_error().contains("modprobe"));
    }

    #[test]
    fn unknown_flags_and_bad_leases_are_refused() {
        assert_eq!(options(4, 0).err(), Some(-22));
        assert!(last_error().contains("unknown flag"));
        let o = options(3, 250).unwrap();
        assert!(o.validate_only && o.all_or_nothing);
        assert_eq!(o.lease, Some(Duration::from_millis(250)));
    }

    #[test]
    fn queue_info_keeps_its_v1_prefix_and_reserved_room() {
        use std::mem::{offset_of, size_of};
        assert_eq!(
            offset_of!(kfdpreempt_queue_info, gc_ip_version) + 4,
            KFDPREEMPT_QUEUE_INFO_MIN_SIZE
        );
        assert_eq!(offset_of!(kfdpreempt_queue_info, reserved), 48);
        assert_eq!(size_of::<kfdpreempt_queue_info>(), 80);
    }

    #[test]
    fn soname_is_the_abi_version() {
        let build = include_str!("../build.rs");
        let soname = format!("-soname,libkfdpreempt.so.{KFDPREEMPT_ABI_VERSION}\"");
        assert!(build.contains(&soname), "build.rs does not set {soname}");
    }

    #[test]
    fn statuses_are_the_uapi_numbers() {
        use kfd_preempt::Outcome;
        for s in [0, 1, 2, 3, -22, -2, -3, -16, -95, -5, -125, -12, -7] {
            assert_eq!(Outcome::from_status(s).status(), s);
        }
    }

    #[test]
    fn header_is_current() {
        let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).unwrap();
        let mut generated = Vec::new();
        cbindgen::Builder::new()
            .with_crate(&dir)
            .with_config(config)
            .generate()
            .unwrap()
            .write(&mut generated);
        let path = dir.join("include/kfdpreempt.h");
        if std::env::var_os("KFDP_BLESS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "include/kfdpreempt.h is stale: KFDP_BLESS=1 cargo test -p kfd-preempt-capi header_is_current"
        );
    }
}
