// SPDX-License-Identifier: GPL-2.0

//! Just enough of BTF (`Documentation/bpf/btf.rst`) to tell where a
//! struct's member lies and how big it is: a module's split BTF
//! (`/sys/kernel/btf/<module>`) over the kernel's own
//! (`/sys/kernel/btf/vmlinux`), whose type ids and string offsets the
//! module's continue.
//!
//! The kernel's BTF API is not exported to modules (`btf_put` and the name
//! lookups are not), so this reads the raw sections. Every read is bounds
//! checked: a malformed blob is an error, never a panic.

use kernel::prelude::*;

const MAGIC: u16 = 0xeb9f;
/// A record's kind, bits 24-30 of its info word, and its entry count, bits
/// 0-23 (`BTF_INFO_KIND`, `BTF_INFO_VLEN`); bit 31 is kflag.
const KIND_MASK: u32 = 0x7f;
const VLEN_MASK: u32 = 0xff_ffff;
const HEADER_LEN: usize = 24;
const TYPE_LEN: usize = 12;

pub(crate) const KIND_INT: u32 = 1;
pub(crate) const KIND_PTR: u32 = 2;
pub(crate) const KIND_ARRAY: u32 = 3;
pub(crate) const KIND_STRUCT: u32 = 4;
pub(crate) const KIND_UNION: u32 = 5;
pub(crate) const KIND_ENUM: u32 = 6;
pub(crate) const KIND_FWD: u32 = 7;
pub(crate) const KIND_TYPEDEF: u32 = 8;
pub(crate) const KIND_VOLATILE: u32 = 9;
pub(crate) const KIND_CONST: u32 = 10;
pub(crate) const KIND_RESTRICT: u32 = 11;
pub(crate) const KIND_FUNC: u32 = 12;
pub(crate) const KIND_FUNC_PROTO: u32 = 13;
pub(crate) const KIND_VAR: u32 = 14;
pub(crate) const KIND_DATASEC: u32 = 15;
pub(crate) const KIND_FLOAT: u32 = 16;
pub(crate) const KIND_DECL_TAG: u32 = 17;
pub(crate) const KIND_TYPE_TAG: u32 = 18;
pub(crate) const KIND_ENUM64: u32 = 19;

/// How deep typedef chains and anonymous members may nest before the blob
/// is taken for a cycle.
const MAX_DEPTH: u32 = 32;
/// Members one lookup may look at; amdkfd's largest struct, with its
/// anonymous unions, has a few hundred.
pub(crate) const MAX_MEMBERS_VISITED: u32 = 1 << 16;
/// The longest name read, as the kernel's BTF verifier allows
/// (`KSYM_NAME_LEN`).
const MAX_NAME_LEN: usize = 512;

fn u32_at(b: &[u8], off: usize) -> Result<u32> {
    let end = off.checked_add(4).ok_or(EINVAL)?;
    let bytes = b.get(off..end).ok_or(EINVAL)?;
    let mut a = [0u8; 4];
    a.copy_from_slice(bytes);
    Ok(u32::from_ne_bytes(a))
}

/// Bytes that follow a type's 12-byte record, by its kind.
fn extra_len(kind: u32, vlen: usize) -> Result<usize> {
    Ok(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => {
            vlen.checked_mul(12).ok_or(EINVAL)?
        }
        KIND_ENUM | KIND_FUNC_PROTO => vlen.checked_mul(8).ok_or(EINVAL)?,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
        | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
        _ => return Err(EINVAL),
    })
}

/// One BTF blob: its type and string sections and where each type starts.
///
/// # Invariants
///
/// `offsets[i]` is the start, in `types`, of a whole record of type id
/// `start_id + i`: its 12 bytes and the extra bytes of its kind lie in
/// `types`.
pub(crate) struct Blob<'a> {
    types: &'a [u8],
    strings: &'a [u8],
    offsets: KVVec<u32>,
    start_id: u32,
}

impl<'a> Blob<'a> {
    /// Parses `raw`, whose first type has id `start_id` (1 for vmlinux's;
    /// for a module's, one past vmlinux's last).
    pub(crate) fn parse(raw: &'a [u8], start_id: u32) -> Result<Self> {
        let magic = raw.get(0..2).ok_or(EINVAL)?;
        if u16::from_ne_bytes([magic[0], magic[1]]) != MAGIC || raw.get(2) != Some(&1) {
            return Err(EINVAL);
        }
        let hdr_len = u32_at(raw, 4)? as usize;
        if hdr_len < HEADER_LEN {
            return Err(EINVAL);
        }
        let section = |off: usize, len: usize| -> Result<&'a [u8]> {
            let start = hdr_len
                .checked_add(u32_at(raw, off)? as usize)
                .ok_or(EINVAL)?;
            let end = start
                .checked_add(u32_at(raw, len)? as usize)
                .ok_or(EINVAL)?;
            raw.get(start..end).ok_or(EINVAL)
        };
        let types = section(8, 12)?;
        let strings = section(16, 20)?;
        let mut offsets = KVVec::new();
        let mut at = 0usize;
        while at < types.len() {
            let info = u32_at(types, at + 4)?;
            let end = at
                .checked_add(
                    TYPE_LEN + extra_len((info >> 24) & KIND_MASK, (info & VLEN_MASK) as usize)?,
                )
                .ok_or(EINVAL)?;
            if end > types.len() {
                return Err(EINVAL);
            }
            offsets.push(u32::try_from(at)?, GFP_KERNEL)?;
            at = end;
        }
        // INVARIANT: each offset was pushed only once its whole record was
        // found to lie in `types`.
        Ok(Blob {
            types,
            strings,
            offsets,
            start_id,
        })
    }

    /// One past the last type id of this blob: a split blob's `start_id`.
    pub(crate) fn end_id(&self) -> Result<u32> {
        u32::try_from(self.offsets.len())?
            .checked_add(self.start_id)
            .ok_or(EINVAL)
    }

    /// The record (and extra bytes) of `id`, if it is this blob's.
    fn record(&self, id: u32) -> Option<&'a [u8]> {
        let i = id.checked_sub(self.start_id)? as usize;
        let off = *self.offsets.get(i)? as usize;
        // By the type invariant the whole record lies in `types`.
        self.types.get(off..)
    }
}

/// A type record's fixed part.
#[derive(Clone, Copy)]
struct Type<'a> {
    name_off: u32,
    kind: u32,
    kflag: bool,
    vlen: usize,
    /// `size` or `type`, by kind.
    size_or_type: u32,
    /// The extra bytes that follow.
    rest: &'a [u8],
}

/// Where a member lies: its offset in bits and its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Member {
    /// From the start of the struct, in bits.
    pub(crate) bit_offset: u64,
    /// Its type id.
    pub(crate) type_id: u32,
    /// Non-zero for a bitfield.
    pub(crate) bitfield_size: u32,
}

/// A module's BTF over the kernel's.
pub(crate) struct Split<'a> {
    base: Blob<'a>,
    module: Blob<'a>,
}

impl<'a> Split<'a> {
    /// `vmlinux` is `/sys/kernel/btf/vmlinux`, `module` a module's file.
    pub(crate) fn parse(vmlinux: &'a [u8], module: &'a [u8]) -> Result<Self> {
        let base = Blob::parse(vmlinux, 1)?;
        let module = Blob::parse(module, base.end_id()?)?;
        Ok(Split { base, module })
    }

    fn ty(&self, id: u32) -> Result<Type<'a>> {
        let rec = self
            .module
            .record(id)
            .or_else(|| self.base.record(id))
            .ok_or(EINVAL)?;
        let info = u32_at(rec, 4)?;
        Ok(Type {
            name_off: u32_at(rec, 0)?,
            kind: (info >> 24) & KIND_MASK,
            kflag: info >> 31 != 0,
            vlen: (info & VLEN_MASK) as usize,
            size_or_type: u32_at(rec, 8)?,
            rest: rec.get(TYPE_LEN..).ok_or(EINVAL)?,
        })
    }

    /// The NUL-terminated name at `off`: a split blob's string offsets
    /// continue the base's.
    fn name(&self, off: u32) -> Result<&'a [u8]> {
        let off = off as usize;
        let (strings, at) = if off < self.base.strings.len() {
            (self.base.strings, off)
        } else {
            (self.module.strings, off - self.base.strings.len())
        };
        let tail = strings.get(at..).ok_or(EINVAL)?;
        // Bounded: a string section with no NUL would otherwise be scanned
        // to its end for every name looked up.
        let len = tail
            .iter()
            .take(MAX_NAME_LEN + 1)
            .position(|&c| c == 0)
            .ok_or(EINVAL)?;
        Ok(&tail[..len])
    }

    /// The ids of the structs named `name`: the module's own first
    /// (amdkfd's structs are amdgpu's), then the kernel's. A name may have
    /// more than one definition (two files' private `struct queue`).
    pub(crate) fn find_structs(&self, name: &[u8]) -> Result<KVVec<u32>> {
        let mut ids = KVVec::new();
        for blob in [&self.module, &self.base] {
            for id in blob.start_id..blob.end_id()? {
                let t = self.ty(id)?;
                if t.kind == KIND_STRUCT && self.name(t.name_off)? == name {
                    ids.push(id, GFP_KERNEL)?;
                }
            }
        }
        Ok(ids)
    }

    /// Follows typedefs and qualifiers from `id` to the type they name.
    fn resolve(&self, mut id: u32) -> Result<(u32, Type<'a>)> {
        for _ in 0..MAX_DEPTH {
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Ok((id, t)),
            }
        }
        Err(EINVAL)
    }

    /// The member `name` of struct or union `id`, looking into anonymous
    /// structs and unions as C does.
    /// At most [`MAX_MEMBERS_VISITED`] members are looked at: nested
    /// anonymous aggregates that name each other would otherwise cost
    /// their member count to the power of [`MAX_DEPTH`].
    pub(crate) fn member(&self, id: u32, name: &[u8]) -> Result<Option<Member>> {
        let budget = core::cell::Cell::new(MAX_MEMBERS_VISITED);
        self.member_at(id, name, 0, &budget)
    }

    fn member_at(
        &self,
        id: u32,
        name: &[u8],
        depth: u32,
        budget: &core::cell::Cell<u32>,
    ) -> Result<Option<Member>> {
        if depth >= MAX_DEPTH {
            return Err(EINVAL);
        }
        let (_, t) = self.resolve(id)?;
        if t.kind != KIND_STRUCT && t.kind != KIND_UNION {
            return Err(EINVAL);
        }
        for i in 0..t.vlen {
            budget.set(budget.get().checked_sub(1).ok_or(EINVAL)?);
            let m = t.rest.get(i * 12..i * 12 + 12).ok_or(EINVAL)?;
            let (name_off, type_id, offset) = (u32_at(m, 0)?, u32_at(m, 4)?, u32_at(m, 8)?);
            let (bit_offset, bitfield_size) = if t.kflag {
                (offset & 0xff_ffff, offset >> 24)
            } else {
                (offset, 0)
            };
            let mname = self.name(name_off)?;
            if mname == name {
                return Ok(Some(Member {
                    bit_offset: bit_offset.into(),
                    type_id,
                    bitfield_size,
                }));
            }
            // An anonymous struct or union's members are the outer one's;
            // an unnamed bitfield (padding) has none.
            let anonymous_aggregate = mname.is_empty()
                && matches!(self.resolve(type_id)?.1.kind, KIND_STRUCT | KIND_UNION);
            if anonymous_aggregate {
                if let Some(inner) = self.member_at(type_id, name, depth + 1, budget)? {
                    return Ok(Some(Member {
                        bit_offset: inner.bit_offset + u64::from(bit_offset),
                        ..inner
                    }));
                }
            }
        }
        Ok(None)
    }

    /// The size in bytes of type `id`.
    pub(crate) fn size_of(&self, id: u32) -> Result<u64> {
        self.size_at(id, 0)
    }

    fn size_at(&self, id: u32, depth: u32) -> Result<u64> {
        if depth >= MAX_DEPTH {
            return Err(EINVAL);
        }
        let (_, t) = self.resolve(id)?;
        match t.kind {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT => {
                Ok(t.size_or_type.into())
            }
            KIND_PTR => Ok(core::mem::size_of::<usize>() as u64),
            KIND_ARRAY => {
                let elem = u32_at(t.rest, 0)?;
                let n = u32_at(t.rest, 8)?;
                self.size_at(elem, depth + 1)?
                    .checked_mul(n.into())
                    .ok_or(EINVAL)
            }
            _ => Err(EINVAL),
        }
    }
}

/// Builds BTF blobs for the tests: a base and a split one over it.
#[cfg(kfdp_kunit)]
pub(crate) mod build {
    use kernel::prelude::*;

    /// A blob under construction.
    pub(crate) struct Builder {
        types: KVVec<u8>,
        strings: KVVec<u8>,
        /// Length of the base's string section, for a split blob.
        str_base: u32,
        next_id: u32,
    }

    impl Builder {
        /// A base blob (ids from 1), or one split over a base whose last
        /// id is `start_id - 1` and whose strings are `str_base` bytes.
        pub(crate) fn new(start_id: u32, str_base: u32) -> Result<Self> {
            let mut strings = KVVec::new();
            if str_base == 0 {
                strings.push(0, GFP_KERNEL)?;
            }
            Ok(Builder {
                types: KVVec::new(),
                strings,
                str_base,
                next_id: start_id,
            })
        }

        /// Adds a string; returns its offset.
        pub(crate) fn string(&mut self, s: &[u8]) -> Result<u32> {
            if s.is_empty() {
                return Ok(0);
            }
            let off = self.str_base + u32::try_from(self.strings.len())?;
            self.strings.extend_from_slice(s, GFP_KERNEL)?;
            self.strings.push(0, GFP_KERNEL)?;
            Ok(off)
        }

        fn word(&mut self, w: u32) -> Result {
            self.types.extend_from_slice(&w.to_ne_bytes(), GFP_KERNEL)?;
            Ok(())
        }

        /// Adds a type record and its extra words; returns its id.
        pub(crate) fn ty(
            &mut self,
            name: &[u8],
            kind: u32,
            vlen: u32,
            size_or_type: u32,
            extra: &[u32],
        ) -> Result<u32> {
            let name_off = self.string(name)?;
            self.word(name_off)?;
            self.word((kind << 24) | vlen)?;
            self.word(size_or_type)?;
            for &w in extra {
                self.word(w)?;
            }
            let id = self.next_id;
            self.next_id += 1;
            Ok(id)
        }

        /// Adds a struct of `size` bytes with `(name, type, bit offset)`
        /// members.
        pub(crate) fn strct(
            &mut self,
            name: &[u8],
            size: u32,
            members: &[(&[u8], u32, u32)],
        ) -> Result<u32> {
            let mut extra = KVVec::new();
            for &(m, t, off) in members {
                extra.push(self.string(m)?, GFP_KERNEL)?;
                extra.push(t, GFP_KERNEL)?;
                extra.push(off, GFP_KERNEL)?;
            }
            self.ty(
                name,
                super::KIND_STRUCT,
                u32::try_from(members.len())?,
                size,
                &extra,
            )
        }

        /// The blob's bytes; also the length of its string section.
        pub(crate) fn finish(self) -> Result<(KVVec<u8>, u32)> {
            let mut out = KVVec::new();
            let type_len = u32::try_from(self.types.len())?;
            let str_len = u32::try_from(self.strings.len())?;
            out.extend_from_slice(&super::MAGIC.to_ne_bytes(), GFP_KERNEL)?;
            out.extend_from_slice(&[1, 0], GFP_KERNEL)?;
            for w in [24, 0, type_len, type_len, str_len] {
                out.extend_from_slice(&u32::to_ne_bytes(w), GFP_KERNEL)?;
            }
            out.extend_from_slice(&self.types, GFP_KERNEL)?;
            out.extend_from_slice(&self.strings, GFP_KERNEL)?;
            Ok((out, str_len))
        }
    }

    pub(crate) use super::{
        KIND_ARRAY, KIND_CONST, KIND_INT, KIND_PTR, KIND_STRUCT, KIND_TYPEDEF, KIND_UNION,
    };
}
