// SPDX-License-Identifier: GPL-2.0

//! A vector of fixed capacity, on the stack up to `N` elements: a batch's
//! items, which the engine and the mux build once per call.
//!
//! A single-entry PREEMPT allocated twice for them (the engine's items, then
//! the mux's part for one backend), an allocation and its free each time
//! (`Documentation/design.rst`, "Where a batch's time goes"). Batches of
//! at most `N` entries, what a scheduler sends, now allocate nothing; a
//! larger one takes one `KVVec` of exactly the capacity asked for.

use core::{
    mem::MaybeUninit,
    ops::{
        Deref,
        DerefMut, //
    },
};
use kernel::{
    alloc::{
        AllocError,
        Flags, //
    },
    prelude::*, //
};

/// See the module documentation.
pub(crate) struct SmallVec<T, const N: usize>(Buf<T, N>);

/// The storage of a [`SmallVec`], private so that only this module can
/// make an `Inline` value.
///
/// # Invariants
///
/// With `Inline`, the first `len` elements of `buf` are initialised, and
/// `len <= N`.
enum Buf<T, const N: usize> {
    /// Up to `N` elements, here.
    Inline {
        len: usize,
        buf: [MaybeUninit<T>; N],
    },
    /// More, in one allocation of the capacity asked for.
    Heap(KVVec<T>),
}

impl<T, const N: usize> SmallVec<T, N> {
    /// An empty vector for `capacity` elements: on the stack up to `N`.
    pub(crate) fn with_capacity(capacity: usize, flags: Flags) -> Result<Self, AllocError> {
        if capacity <= N {
            // INVARIANT: no element is initialised, and 0 <= N.
            Ok(Self(Buf::Inline {
                len: 0,
                buf: [const { MaybeUninit::uninit() }; N],
            }))
        } else {
            Ok(Self(Buf::Heap(KVVec::with_capacity(capacity, flags)?)))
        }
    }

    /// Appends `value`; gives it back if the capacity is used up (a heap
    /// vector does not grow: its capacity was asked for up front).
    pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
        match &mut self.0 {
            Buf::Inline { len, buf } => {
                let Some(slot) = buf.get_mut(*len) else {
                    return Err(value);
                };
                slot.write(value);
                // INVARIANT: the element at the old `len` was just
                // initialised, and `len` was below `N`.
                *len += 1;
                Ok(())
            }
            Buf::Heap(v) => v.push_within_capacity(value).map_err(|e| e.0),
        }
    }
}

impl<T, const N: usize> Deref for SmallVec<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        match &self.0 {
            Buf::Inline { len, buf } => {
                let init = &buf[..*len];
                // SAFETY: by the type invariant the first `len` elements
                // are initialised, and `MaybeUninit<T>` has `T`'s layout.
                unsafe { &*(core::ptr::from_ref(init) as *const [T]) }
            }
            Buf::Heap(v) => v,
        }
    }
}

impl<T, const N: usize> DerefMut for SmallVec<T, N> {
    fn deref_mut(&mut self) -> &mut [T] {
        match &mut self.0 {
            Buf::Inline { len, buf } => {
                let init = &mut buf[..*len];
                // SAFETY: as in `deref`; the borrow is unique.
                unsafe { &mut *(core::ptr::from_mut(init) as *mut [T]) }
            }
            Buf::Heap(v) => v,
        }
    }
}

impl<T, const N: usize> Drop for SmallVec<T, N> {
    fn drop(&mut self) {
        if let Buf::Inline { len, buf } = &mut self.0 {
            let init = &mut buf[..*len];
            // SAFETY: by the type invariant these elements are initialised;
            // they are dropped once, here, and never read again.
            unsafe { core::ptr::drop_in_place(core::ptr::from_mut(init) as *mut [T]) };
        }
    }
}

#[cfg(kfdp_kunit)]
#[kunit_tests(kfdp_small_vec)]
mod tests {
    use super::*;
    use kernel::sync::atomic::{
        Atomic,
        Relaxed, //
    };

    /// Counts its drops in the counter it points to.
    struct Counted<'a>(&'a Atomic<u32>, u32);

    impl Drop for Counted<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn inline_up_to_n_then_full() -> Result {
        let mut v = SmallVec::<u32, 4>::with_capacity(4, GFP_KERNEL)?;
        assert!(matches!(v.0, Buf::Inline { .. }));
        for i in 0..4 {
            assert!(v.push(i).is_ok());
        }
        assert_eq!(v.push(9), Err(9));
        assert_eq!(&v[..], &[0, 1, 2, 3]);
        v[2] = 7;
        assert_eq!(v.iter().sum::<u32>(), 11);
        Ok(())
    }

    #[test]
    fn heap_beyond_n_keeps_its_capacity() -> Result {
        let mut v = SmallVec::<u32, 2>::with_capacity(3, GFP_KERNEL)?;
        assert!(matches!(v.0, Buf::Heap(_)));
        for i in 0..3 {
            assert!(v.push(i).is_ok());
        }
        assert_eq!(v.push(3), Err(3));
        assert_eq!(&v[..], &[0, 1, 2]);
        Ok(())
    }

    #[test]
    fn drops_each_element_once() -> Result {
        let drops = Atomic::new(0u32);
        {
            let mut v = SmallVec::<Counted<'_>, 4>::with_capacity(4, GFP_KERNEL)?;
            for i in 0..3 {
                assert!(v.push(Counted(&drops, i)).is_ok());
            }
            assert_eq!(v.len(), 3);
            assert_eq!(v[1].1, 1);
        }
        assert_eq!(drops.load(Relaxed), 3);
        Ok(())
    }
}
