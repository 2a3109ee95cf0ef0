// SPDX-License-Identifier: GPL-2.0

//! A map kept as a vector sorted by key: what the engine keys its marks and
//! freezes in.
//!
//! Binder keys its state in `RBTree`s; this is the same O(log n) lookup
//! without an allocation per entry. An `RBTree` node is one allocation, and
//! a 64-queue PREEMPT made 128 of them (the owner's marks and the
//! registry's), which cost more than the rest of the batch's bookkeeping
//! (`Documentation/design.rst`, "Where a batch's time goes"). Inserting in
//! key order, as a batch sorted by queue does, appends; the vector grows
//! by doubling, so its allocations are amortised, and is a `KVVec`, so a
//! large map needs no physically contiguous memory.

use kernel::prelude::*;

/// See the module documentation.
///
/// # Invariants
///
/// `entries` is sorted by key, strictly: no key appears twice.
pub(crate) struct SortedMap<K, V> {
    entries: KVVec<(K, V)>,
}

impl<K: Ord + Copy, V> SortedMap<K, V> {
    /// An empty map; allocates nothing.
    pub(crate) const fn new() -> Self {
        // INVARIANT: An empty vector is sorted.
        Self {
            entries: KVVec::new(),
        }
    }

    fn find(&self, key: &K) -> core::result::Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        let i = self.find(key).ok()?;
        self.entries.get(i).map(|(_, v)| v)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        let i = self.find(key).ok()?;
        self.entries.get_mut(i).map(|(_, v)| v)
    }

    /// Inserts `value` at `key`, replacing (and returning) a value there.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Result<Option<V>> {
        match self.find(&key) {
            Ok(i) => {
                let slot = self.entries.get_mut(i).ok_or(EINVAL)?;
                Ok(Some(core::mem::replace(&mut slot.1, value)))
            }
            Err(i) => {
                self.entries.reserve(1, GFP_KERNEL)?;
                // INVARIANT: `i` is where `key` keeps the order.
                self.entries
                    .insert_within_capacity(i, (key, value))
                    .map_err(|_| ENOMEM)?;
                Ok(None)
            }
        }
    }

    /// Inserts `value` at `key` unless a value is there; returns whether it
    /// inserted. One search, where `get` and then `insert` make two.
    pub(crate) fn insert_new(&mut self, key: K, value: V) -> Result<bool> {
        let Err(i) = self.find(&key) else {
            return Ok(false);
        };
        self.entries.reserve(1, GFP_KERNEL)?;
        // INVARIANT: `i` is where `key` keeps the order.
        self.entries
            .insert_within_capacity(i, (key, value))
            .map_err(|_| ENOMEM)?;
        Ok(true)
    }

    /// Empties the map and frees its memory.
    pub(crate) fn clear(&mut self) {
        self.entries = KVVec::new();
    }

    /// Removes the value at `key`, if any.
    pub(crate) fn remove(&mut self, key: &K) -> Option<V> {
        let i = self.find(key).ok()?;
        self.entries.remove(i).ok().map(|(_, v)| v)
    }

    /// Keeps the entries `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&K, &mut V) -> bool) {
        // INVARIANT: Removing entries keeps the rest in order.
        self.entries.retain(|(k, v)| keep(k, v));
    }

    /// Removes the run of entries from the first key not below `from`
    /// while `same` holds for the key (a process's marks, for example).
    pub(crate) fn remove_run(&mut self, from: &K, same: impl Fn(&K) -> bool) {
        self.remove_in_run(from, same, |_, _| true);
    }

    /// As [`Self::remove_run`], but only the entries of the run that
    /// `remove` picks; the others stay.
    pub(crate) fn remove_in_run(
        &mut self,
        from: &K,
        same: impl Fn(&K) -> bool,
        remove: impl Fn(&K, &V) -> bool,
    ) {
        let start = match self.find(from) {
            Ok(i) | Err(i) => i,
        };
        let end = start
            + self.entries[start..]
                .iter()
                .take_while(|(k, _)| same(k))
                .count();
        if start == end {
            return;
        }
        let mut i = 0;
        // INVARIANT: Removing entries keeps the rest in order.
        self.entries.retain(|(k, v)| {
            let inside = (start..end).contains(&i);
            i += 1;
            !(inside && remove(k, v))
        });
    }

    /// The first entry whose key is not below `from`.
    pub(crate) fn lower_bound(&self, from: &K) -> Option<(&K, &V)> {
        let i = match self.find(from) {
            Ok(i) | Err(i) => i,
        };
        self.entries.get(i).map(|(k, v)| (k, v))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
}
