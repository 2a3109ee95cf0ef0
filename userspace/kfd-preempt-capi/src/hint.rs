//! The hint calls: a latency-critical service tells kfd-preemptd that
//! work is coming (`kfd_preempt::hint`, `Documentation/userspace.rst`,
//! "HINTS").
//!
//! ```c
//! kfdpreempt_hint_client *hints;
//! if (kfdpreempt_hint_connect("/run/kfd-preemptd/hint.sock", &hints) == 0) {
//!         // A request arrived: work within 20 ms on every node of ours.
//!         if (kfdpreempt_hint_begin(hints, 20, NULL, 0) < 0)
//!                 fprintf(stderr, "%s\n", kfdpreempt_last_error());
//!         // ... prepare and launch the request ...
//! }
//! ```

use std::{ffi::c_char, ffi::CStr, slice, time::Duration};

use kfd_preempt::hint::{HintClient, HintError};

use super::record_error;

/// A connection to kfd-preemptd's hint socket. Opaque to C.
pub struct kfdpreempt_hint_client {
    client: HintClient,
}

/// Records `e` as this thread's last error and returns its negative errno.
fn fail_hint(e: &HintError) -> i32 {
    record_error(&e.to_string());
    -e.errno().raw_os_error()
}

/// Connects to the daemon's hint socket `path` (its `hint_socket`) into
/// `*out`.
///
/// # Safety
///
/// `path` must be null or a NUL-terminated string; `out` null or valid for
/// writing a pointer.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_hint_connect(
    path: *const c_char,
    out: *mut *mut kfdpreempt_hint_client,
) -> i32 {
    if path.is_null() || out.is_null() {
        return super::invalid("path or out is NULL");
    }
    // SAFETY: `path` is non-null and NUL-terminated by the caller's
    // contract.
    let path = unsafe { CStr::from_ptr(path) };
    let Ok(path) = path.to_str() else {
        return super::invalid("path is not UTF-8");
    };
    match HintClient::connect(path) {
        Ok(client) => {
            let boxed = Box::into_raw(Box::new(kfdpreempt_hint_client { client }));
            // SAFETY: `out` is non-null and valid for writes by contract.
            unsafe { *out = boxed };
            0
        }
        Err(e) => fail_hint(&e),
    }
}

/// Closes the connection, which ends its hint. `client` may be null.
///
/// # Safety
///
/// `client` must be null or a pointer from [`kfdpreempt_hint_connect`] not
/// closed yet.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_hint_close(client: *mut kfdpreempt_hint_client) {
    if !client.is_null() {
        // SAFETY: by the caller's contract `client` came from Box::into_raw
        // in kfdpreempt_hint_connect and is released exactly once.
        drop(unsafe { Box::from_raw(client) });
    }
}

/// The client behind `client`, or an error for a null pointer.
///
/// # Safety
///
/// `client` must be null or a live pointer from [`kfdpreempt_hint_connect`].
unsafe fn client<'a>(client: *const kfdpreempt_hint_client) -> Result<&'a HintClient, i32> {
    // SAFETY: by the caller's contract a non-null `client` is live.
    unsafe { client.as_ref() }
        .map(|c| &c.client)
        .ok_or_else(|| super::invalid("client is NULL"))
}

/// Says that work is coming within `within_ms` on the `n` nodes `gpu_ids`
/// (none: every node where this process has queues). Returns the number
/// of nodes the hint holds on, or a negative errno: `-EPERM` for a process
/// that is not a tenant or whose level is the lowest, `-ENOENT` for a node
/// without its queues, `-EAGAIN` past the daemon's rate, `-EINVAL` for 0
/// ms or longer than the daemon takes. The hint lasts until the work comes
/// and goes, `within_ms` pass with no work, [`kfdpreempt_hint_end`], or
/// the connection closes.
///
/// # Safety
///
/// `client` must be null or live; `gpu_ids` null (with `n` 0) or valid for
/// reading `n` values.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_hint_begin(
    client: *const kfdpreempt_hint_client,
    within_ms: u32,
    gpu_ids: *const u32,
    n: usize,
) -> i32 {
    // SAFETY: forwarded caller contract.
    let client = match unsafe { self::client(client) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    let nodes: &[u32] = if n == 0 {
        &[]
    } else if gpu_ids.is_null() {
        return super::invalid("gpu_ids is NULL but n is not 0");
    } else {
        // SAFETY: non-null and valid for `n` reads by the caller's contract.
        unsafe { slice::from_raw_parts(gpu_ids, n) }
    };
    match client.begin(Duration::from_millis(within_ms.into()), nodes) {
        Ok(hint) => {
            let held = hint.nodes();
            hint.leave();
            i32::try_from(held).unwrap_or(i32::MAX)
        }
        Err(e) => fail_hint(&e),
    }
}

/// Ends the connection's hint now, if one holds.
///
/// # Safety
///
/// `client` must be null or live.
#[no_mangle]
pub unsafe extern "C" fn kfdpreempt_hint_end(client: *const kfdpreempt_hint_client) -> i32 {
    // SAFETY: forwarded caller contract.
    let client = match unsafe { self::client(client) } {
        Ok(c) => c,
        Err(e) => return e,
    };
    match client.end() {
        Ok(()) => 0,
        Err(e) => fail_hint(&e),
    }
}

#[cfg(test)]
mod tests {
    use std::ptr;

    use super::*;

    #[test]
    fn null_clients_are_einval_and_an_absent_socket_is_its_errno() {
        // SAFETY: null pointers are allowed by every function's contract;
        // the path is NUL-terminated.
        unsafe {
            assert_eq!(kfdpreempt_hint_begin(ptr::null(), 5, ptr::null(), 0), -22);
            assert_eq!(kfdpreempt_hint_end(ptr::null()), -22);
            let mut c = ptr::null_mut();
            assert_eq!(kfdpreempt_hint_connect(ptr::null(), &mut c), -22);
            let rc = kfdpreempt_hint_connect(c"/nonexistent/hint.sock".as_ptr(), &mut c);
            assert_eq!(rc, -2); // ENOENT
            assert!(c.is_null());
            let msg = CStr::from_ptr(crate::kfdpreempt_last_error()).to_string_lossy();
            assert!(msg.contains("hint_socket"), "{msg}");
            kfdpreempt_hint_close(ptr::null_mut());
        }
    }
}
