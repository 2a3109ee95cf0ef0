// SPDX-License-Identifier: GPL-2.0

//! The layout gate (`Documentation/design.rst`, "amdgpu identity", gate 4): every
//! amdkfd field the glue reads or writes must lie where the running
//! amdgpu's BTF (`/sys/kernel/btf/amdgpu`) says it does, with the size it
//! says. The glue was compiled against some amdgpu source (the kernel's
//! own, or an amdgpu-dkms tree configured for this kernel); a different one
//! loaded would have its queues corrupted. So a difference refuses the
//! module's load, or an attach if amdgpu came later, naming the field.
//!
//! Without BTF to compare with (a kernel built without
//! `CONFIG_DEBUG_INFO_BTF_MODULES`, as the project's test kernel is, or no
//! amdgpu loaded yet) the gate says so and leaves the build-time checks
//! (`src/glue/amdkfd-reviewed.txt`, srcversion) and the structural ones at
//! attach (`kfdp_check_layout`) to stand alone.

use kernel::{ffi::c_void, prelude::*, str::CStr};

use crate::glue;

mod btf;

/// One field as the glue was compiled to see it.
#[derive(Clone, Copy)]
pub(crate) struct Field<'a> {
    /// The struct's tag, without `struct`.
    pub(crate) ty: &'a [u8],
    /// The member's name.
    pub(crate) member: &'a [u8],
    /// `offsetof`, bytes.
    pub(crate) offset: u64,
    /// `sizeof`, bytes.
    pub(crate) size: u64,
}

/// Where the running module's BTF has a field the glue disagrees on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// The struct is not in the BTF at all.
    NoStruct,
    /// The struct has no such member.
    NoMember,
    /// A bitfield, which `offsetof` cannot name: never what the glue means.
    Bitfield,
    /// Its offset and size, bytes.
    At(u64, u64),
}

/// The first field whose place differs, and where BTF has it.
pub(crate) struct Mismatch<'a> {
    pub(crate) field: Field<'a>,
    pub(crate) found: Found,
}

/// Where `split`'s struct `id` has `field`.
fn locate(split: &btf::Split<'_>, id: u32, field: &Field<'_>) -> Result<Found> {
    Ok(match split.member(id, field.member)? {
        None => Found::NoMember,
        Some(m) if m.bitfield_size != 0 || m.bit_offset % 8 != 0 => Found::Bitfield,
        Some(m) => Found::At(m.bit_offset / 8, split.size_of(m.type_id)?),
    })
}

/// Compares every field with `split`; how many matched, or the first that
/// does not. An error is a blob this parser cannot read.
///
/// The table lists each struct's fields together. A struct passes if one
/// definition of that name has all of them where the glue has them (BTF
/// keeps same-named structs of different files apart); otherwise the
/// first definition's first difference is reported.
pub(crate) fn compare<'a>(
    split: &btf::Split<'_>,
    fields: &[Field<'a>],
) -> Result<core::result::Result<usize, Mismatch<'a>>> {
    let mut rest = fields;
    while let Some(first) = rest.first() {
        let n = rest.iter().take_while(|f| f.ty == first.ty).count();
        let (group, next) = rest.split_at(n);
        let ids = split.find_structs(first.ty)?;
        let mut mismatch = None;
        for &id in ids.iter() {
            let mut differs = None;
            for &field in group {
                let found = locate(split, id, &field)?;
                if found != Found::At(field.offset, field.size) {
                    differs = Some(Mismatch { field, found });
                    break;
                }
            }
            match differs {
                None => {
                    mismatch = None;
                    break;
                }
                Some(m) => {
                    mismatch = mismatch.or(Some(m));
                }
            }
        }
        if ids.is_empty() {
            mismatch = Some(Mismatch {
                field: *first,
                found: Found::NoStruct,
            });
        }
        if let Some(m) = mismatch {
            return Ok(Err(m));
        }
        rest = next;
    }
    Ok(Ok(fields.len()))
}

/// The running kernel's BTF of a module, as read from sysfs.
///
/// # Invariants
///
/// `buf` points to `len` bytes that `kfdp_btf_read` allocated and this
/// value alone frees.
struct BtfFile {
    buf: core::ptr::NonNull<u8>,
    len: usize,
}

impl BtfFile {
    fn read(name: &CStr) -> Result<Self> {
        let mut buf: *mut c_void = core::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: `name` is NUL-terminated; `buf` and `len` are writable.
        kernel::error::to_result(unsafe {
            glue::kfdp_btf_read(name.as_char_ptr(), &mut buf, &mut len)
        })?;
        let buf = core::ptr::NonNull::new(buf.cast::<u8>()).ok_or(EINVAL)?;
        // INVARIANT: `kfdp_btf_read` succeeded: `buf` holds `len` bytes.
        Ok(BtfFile { buf, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: By the type invariant `buf` holds `len` bytes, alive and
        // unaliased until `drop`.
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr(), self.len) }
    }
}

impl Drop for BtfFile {
    fn drop(&mut self) {
        // SAFETY: Allocated by `kfdp_btf_read` and freed only here (type
        // invariant).
        unsafe { glue::kfdp_btf_free(self.buf.as_ptr().cast()) };
    }
}

/// The glue's table of fields.
fn glue_fields() -> Result<KVVec<Field<'static>>> {
    let mut n = 0u32;
    // SAFETY: `n` is a valid place for the count; the call has no other
    // precondition and returns the glue's static table.
    let table = unsafe { glue::kfdp_layout_fields(&mut n) };
    let mut out = KVVec::with_capacity(n as usize, GFP_KERNEL)?;
    for i in 0..n as usize {
        // SAFETY: `i < n`, within the static table.
        let f = unsafe { &*table.add(i) };
        // SAFETY: The table's names are static, NUL-terminated literals.
        let (ty, member) = unsafe {
            (
                CStr::from_char_ptr(f.type_name),
                CStr::from_char_ptr(f.member),
            )
        };
        let field = Field {
            ty: ty.to_bytes(),
            member: member.to_bytes(),
            offset: f.offset.into(),
            size: f.size.into(),
        };
        out.push(field, GFP_KERNEL)?;
    }
    Ok(out)
}

/// An errno's name as dmesg and debugfs say it, for those this gate meets
/// (whether or not the kernel has `CONFIG_SYMBOLIC_ERRNAME`).
fn errno_name(e: Error) -> &'static str {
    [
        (ENOENT, "ENOENT"),
        (EPERM, "EPERM"),
        (EACCES, "EACCES"),
        (EINVAL, "EINVAL"),
        (ENOMEM, "ENOMEM"),
        (EFBIG, "EFBIG"),
        (ESRCH, "ESRCH"),
        (EIO, "EIO"),
    ]
    .into_iter()
    .find(|(known, _)| *known == e)
    .map_or("errno", |(_, name)| name)
}

/// What the gate concluded about the amdgpu loaded now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Every field matched: how many.
    Matches(usize),
    /// Nothing to compare with: why (reading or parsing the BTF).
    Unchecked(Error),
    /// A field differs (already reported).
    Refused,
}

/// A BTF file that is there but cannot be read as sysfs's (not sysfs, too
/// large, an I/O error): nothing says the layout is the one built for.
fn unreadable(name: &CStr, e: Error) -> Verdict {
    pr_warn!(
        "refusing amdgpu: /sys/kernel/btf/{} could not be read ({} {})\n",
        name.to_str().unwrap_or("?"),
        errno_name(e),
        e.to_errno()
    );
    Verdict::Refused
}

/// Checks the amdgpu loaded now, and says what it found. An error is one
/// that may pass (memory): it is not a verdict, and the caller fails with
/// it rather than remember it.
fn check() -> Result<Verdict> {
    let vmlinux = match BtfFile::read(c"vmlinux") {
        Ok(f) => f,
        Err(e) if e == ENOMEM => return Err(e),
        Err(e) if e != ENOENT => return Ok(unreadable(c"vmlinux", e)),
        Err(e) => {
            pr_info!(
                "amdgpu's layout not checked: no kernel BTF (/sys/kernel/btf/vmlinux: {} {}; CONFIG_DEBUG_INFO_BTF=n?); the build-time checks stand\n",
                errno_name(e),
                e.to_errno()
            );
            return Ok(Verdict::Unchecked(e));
        }
    };
    let amdgpu = match BtfFile::read(c"amdgpu") {
        Ok(f) => f,
        Err(e) if e == ENOMEM => return Err(e),
        Err(e) if e != ENOENT => return Ok(unreadable(c"amdgpu", e)),
        Err(e) => {
            pr_info!(
                "amdgpu's layout not checked yet: no /sys/kernel/btf/amdgpu ({} {}: amdgpu not loaded, or built without BTF); checked again at attach\n",
                errno_name(e),
                e.to_errno()
            );
            return Ok(Verdict::Unchecked(e));
        }
    };
    let fields = glue_fields()?;
    let result = btf::Split::parse(vmlinux.bytes(), amdgpu.bytes())
        .and_then(|split| compare(&split, &fields));
    match result {
        Ok(Ok(n)) => {
            pr_info!("the layout of {n} amdkfd fields matches amdgpu's BTF\n");
            Ok(Verdict::Matches(n))
        }
        Ok(Err(m)) => {
            report(&m);
            Ok(Verdict::Refused)
        }
        Err(e) if e == ENOMEM => Err(e),
        // The kernel's BTF is there but does not parse (or costs more than
        // any real amdgpu's would): nothing then says that the layout is
        // the one the glue was built for, so it is refused, not trusted.
        Err(e) => {
            pr_warn!(
                "refusing amdgpu: its BTF could not be parsed ({} {}); if this kernel's BTF is of a newer format, rebuild kfd_preempt from a newer release\n",
                errno_name(e),
                e.to_errno()
            );
            Ok(Verdict::Refused)
        }
    }
}

fn report(m: &Mismatch<'_>) {
    let ty = core::str::from_utf8(m.field.ty).unwrap_or("?");
    let member = core::str::from_utf8(m.field.member).unwrap_or("?");
    let (off, size) = (m.field.offset, m.field.size);
    match m.found {
        Found::At(o, s) => pr_err!(
            "refusing amdgpu: struct {ty}.{member} is at byte {o} ({s} bytes) in its BTF, but this module was built for byte {off} ({size} bytes): it was built against another amdgpu's source; rebuild it against the running amdgpu's (Documentation/building.rst, \"The layout gate\")\n"
        ),
        Found::NoStruct => pr_err!(
            "refusing amdgpu: its BTF has no struct {ty}, which this module was built to use ({member} at byte {off}); rebuild it against the running amdgpu's source\n"
        ),
        Found::NoMember => pr_err!(
            "refusing amdgpu: its struct {ty} has no member {member}, which this module was built to use at byte {off}; rebuild it against the running amdgpu's source\n"
        ),
        Found::Bitfield => pr_err!(
            "refusing amdgpu: its struct {ty}.{member} is a bitfield, not the field at byte {off} this module was built for; rebuild it against the running amdgpu's source\n"
        ),
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised in the module initialiser before first use.
    pub(crate) unsafe(uninit) static VERDICT: Mutex<Option<(u64, Verdict)>> = None;
}

/// The module notifier that tells one load of amdgpu from the next, so that
/// a verdict is never taken for another amdgpu's.
///
/// # Invariants
///
/// The glue's module notifier is registered.
pub(crate) struct Notifier(());

impl Notifier {
    /// Registers it, then gates the load: an error if the amdgpu loaded now
    /// differs.
    pub(crate) fn register_and_gate() -> Result<Self> {
        // SAFETY: Registers a static notifier block, once: only this
        // function makes a `Notifier`, and the module makes one; `Drop`
        // removes it.
        kernel::error::to_result(unsafe { glue::kfdp_layout_register() })?;
        // INVARIANT: Registered just above.
        let notifier = Notifier(());
        gate().map(|_| notifier)
    }
}

impl Drop for Notifier {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant), and removed only here.
        unsafe { glue::kfdp_layout_unregister() };
    }
}

/// How many times amdgpu has come or gone since this module loaded.
pub(crate) fn generation() -> u64 {
    // SAFETY: Reads an atomic counter; no precondition.
    unsafe { glue::kfdp_amdgpu_generation_now() }
}

/// The gate before an attach: the verdict about the amdgpu loaded now,
/// worked out once per load of amdgpu. Returns the [`generation`] it
/// vouches for: the caller checks it again once it holds amdgpu.
pub(crate) fn gate() -> Result<u64> {
    let generation = generation();
    let mut cached = VERDICT.lock();
    let verdict = match *cached {
        Some((g, v)) if g == generation => v,
        _ => {
            let v = check()?;
            *cached = Some((generation, v));
            v
        }
    };
    match verdict {
        Verdict::Refused => Err(EINVAL),
        Verdict::Matches(_) | Verdict::Unchecked(_) => Ok(generation),
    }
}

/// debugfs `kfd_preempt/layout`: the verdict about the amdgpu loaded now,
/// for `kfd-preempt doctor`: `matches N`, `refused`, or `unchecked` and why.
pub(crate) fn show(_: &(), f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
    let generation = generation();
    match *VERDICT.lock() {
        Some((g, v)) if g == generation => match v {
            Verdict::Matches(n) => writeln!(f, "matches {n}"),
            Verdict::Refused => writeln!(f, "refused"),
            Verdict::Unchecked(e) => writeln!(f, "unchecked {} {}", errno_name(e), e.to_errno()),
        },
        _ => writeln!(f, "unchecked amdgpu-reloaded"),
    }
}

#[cfg(kfdp_kunit)]
#[kunit_tests(kfdp_layout)]
mod tests {
    use super::btf::build::*;
    use super::*;

    /// vmlinux's part: `int` (4 bytes), `long` (8), a pointer and
    /// `struct list_head` (16).
    fn base() -> Result<(KVVec<u8>, u32, u32)> {
        let mut b = Builder::new(1, 0)?;
        b.ty(b"int", KIND_INT, 0, 4, &[32])?;
        let long = b.ty(b"long", KIND_INT, 0, 8, &[64])?;
        let ptr = b.ty(b"", KIND_PTR, 0, long, &[])?;
        b.strct(b"list_head", 16, &[(b"next", ptr, 0), (b"prev", ptr, 64)])?;
        let (bytes, str_len) = b.finish()?;
        Ok((bytes, 5, str_len))
    }

    /// amdgpu's part over it: `struct queue_properties { int type; union
    /// { long a; int b; }; u32 arr[3]; }` (u32 a typedef of int) and
    /// `struct queue { struct list_head list; struct queue_properties
    /// properties; }`, with `shift` bytes of padding before `type`.
    fn module(start: u32, str_base: u32, shift: u32) -> Result<KVVec<u8>> {
        let mut b = Builder::new(start, str_base)?;
        let (int, long, list_head) = (1, 2, 4);
        let u32t = b.ty(b"u32", KIND_TYPEDEF, 0, int, &[])?;
        let arr = b.ty(b"", KIND_ARRAY, 0, 0, &[u32t, int, 3])?;
        let (a, bn) = (b.string(b"a")?, b.string(b"b")?);
        let union = b.ty(b"", KIND_UNION, 2, 8, &[a, long, 0, bn, int, 0])?;
        let bits = shift * 8;
        let props = b.strct(
            b"queue_properties",
            32 + shift,
            &[
                (b"type", int, bits),
                (b"", union, bits + 64),
                (b"arr", arr, bits + 128),
            ],
        )?;
        b.strct(
            b"queue",
            48 + shift,
            &[(b"list", list_head, 0), (b"properties", props, 128)],
        )?;
        Ok(b.finish()?.0)
    }

    fn field(ty: &'static [u8], member: &'static [u8], offset: u64, size: u64) -> Field<'static> {
        Field {
            ty,
            member,
            offset,
            size,
        }
    }

    const FIELDS: [Field<'static>; 6] = [
        Field {
            ty: b"queue",
            member: b"list",
            offset: 0,
            size: 16,
        },
        Field {
            ty: b"queue",
            member: b"properties",
            offset: 16,
            size: 32,
        },
        Field {
            ty: b"queue_properties",
            member: b"type",
            offset: 0,
            size: 4,
        },
        Field {
            ty: b"queue_properties",
            member: b"a",
            offset: 8,
            size: 8,
        },
        Field {
            ty: b"queue_properties",
            member: b"b",
            offset: 8,
            size: 4,
        },
        Field {
            ty: b"queue_properties",
            member: b"arr",
            offset: 16,
            size: 12,
        },
    ];

    #[test]
    fn the_built_layout_matches() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let amdgpu = module(end, str_len, 0)?;
        let split = btf::Split::parse(&vmlinux, &amdgpu)?;
        assert!(matches!(compare(&split, &FIELDS)?, Ok(6)));
        Ok(())
    }

    #[test]
    fn a_shifted_field_is_named() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let amdgpu = module(end, str_len, 8)?;
        let split = btf::Split::parse(&vmlinux, &amdgpu)?;
        // struct queue's own members did not move, but one grew.
        let r = compare(&split, &FIELDS)?;
        assert!(matches!(r, Err(ref m) if m.field.member == b"properties"));
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::At(16, 40),
                ..
            })
        ));
        // The first member of queue_properties that moved is named.
        let r = compare(&split, &FIELDS[2..])?;
        assert!(matches!(r, Err(ref m) if m.field.member == b"type"));
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::At(8, 4),
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn missing_structs_and_members_are_named() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let amdgpu = module(end, str_len, 0)?;
        let split = btf::Split::parse(&vmlinux, &amdgpu)?;
        let r = compare(&split, &[field(b"kfd_node", b"dqm", 0, 8)])?;
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::NoStruct,
                ..
            })
        ));
        let r = compare(&split, &[field(b"queue", b"mqd", 0, 8)])?;
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::NoMember,
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn one_of_two_same_named_structs_may_match() -> Result {
        let (vmlinux, end, str_len) = base()?;
        // Another file's `struct queue` first, then amdkfd's.
        let mut b = Builder::new(end, str_len)?;
        b.strct(b"queue", 4, &[(b"list", 1, 0)])?;
        b.strct(b"queue", 16, &[(b"list", 4, 0)])?;
        let amdgpu = b.finish()?.0;
        let split = btf::Split::parse(&vmlinux, &amdgpu)?;
        assert!(matches!(
            compare(&split, &[field(b"queue", b"list", 0, 16)])?,
            Ok(1)
        ));
        // Neither has it at byte 8: the first one's place is reported.
        let r = compare(&split, &[field(b"queue", b"list", 8, 16)])?;
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::At(0, 4),
                ..
            })
        ));
        Ok(())
    }

    #[test]
    fn qualifiers_are_seen_through_and_bitfields_refused() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let mut b = Builder::new(end, str_len)?;
        // `const u32 c;` through a typedef, and `int f:3;` (kflag set: the
        // member's offset word is bitfield size << 24 | bit offset).
        let u32t = b.ty(b"u32", KIND_TYPEDEF, 0, 1, &[])?;
        let constant = b.ty(b"", KIND_CONST, 0, u32t, &[])?;
        let (c, f) = (b.string(b"c")?, b.string(b"f")?);
        b.ty(
            b"flags",
            0x80 | KIND_STRUCT,
            2,
            8,
            &[c, constant, 0, f, 1, (3 << 24) | 32],
        )?;
        let amdgpu = b.finish()?.0;
        let split = btf::Split::parse(&vmlinux, &amdgpu)?;
        assert!(matches!(
            compare(&split, &[field(b"flags", b"c", 0, 4)])?,
            Ok(1)
        ));
        let r = compare(&split, &[field(b"flags", b"f", 4, 4)])?;
        assert!(matches!(
            r,
            Err(Mismatch {
                found: Found::Bitfield,
                ..
            })
        ));
        Ok(())
    }

    /// Anonymous members that fan out over 30 levels: a lookup of a name
    /// none of them has would look at 2^31 members. The budget makes it
    /// an error, which the gate takes for a blob it cannot trust.
    #[test]
    fn a_fan_of_anonymous_members_runs_out_of_budget() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let mut b = Builder::new(end, str_len)?;
        let mut level = b.strct(b"", 4, &[(b"leaf", 1, 0)])?;
        for _ in 0..30 {
            level = b.strct(b"", 4, &[(b"", level, 0), (b"", level, 0)])?;
        }
        b.strct(b"queue", 4, &[(b"", level, 0)])?;
        let fan = b.finish()?.0;
        let split = btf::Split::parse(&vmlinux, &fan)?;
        // Found at once down the first branch...
        assert!(matches!(split.member(end + 31, b"leaf"), Ok(Some(_))));
        // ...but a name that is nowhere costs the budget, not 2^31.
        assert_eq!(split.member(end + 31, b"nosuch"), Err(EINVAL));
        // A name longer than any the kernel's verifier lets through.
        let mut b = Builder::new(end, str_len)?;
        let mut long = KVVec::new();
        long.resize(600, b'x', GFP_KERNEL)?;
        b.strct(&long, 4, &[(b"leaf", 1, 0)])?;
        let named = b.finish()?.0;
        let split = btf::Split::parse(&vmlinux, &named)?;
        assert!(split.find_structs(b"queue").is_err());
        Ok(())
    }

    #[test]
    fn malformed_btf_is_an_error_not_a_verdict() -> Result {
        let (vmlinux, end, str_len) = base()?;
        let amdgpu = module(end, str_len, 0)?;
        // Cut short: in the header, or in a section.
        for cut in [0, 3, 23, 30, 40] {
            assert!(btf::Split::parse(&vmlinux, &amdgpu[..cut]).is_err());
        }
        // A type section whose length (header bytes 12-15) ends inside its
        // last record, while the section itself lies in the blob.
        let mut short = KVVec::new();
        short.extend_from_slice(&amdgpu, GFP_KERNEL)?;
        let type_len = u32::from_ne_bytes([short[12], short[13], short[14], short[15]]);
        short[12..16].copy_from_slice(&(type_len - 4).to_ne_bytes());
        assert!(btf::Split::parse(&vmlinux, &short).is_err());
        // A wrong magic.
        let mut bad = KVVec::new();
        bad.extend_from_slice(&amdgpu, GFP_KERNEL)?;
        bad[0] ^= 0xff;
        assert!(btf::Split::parse(&vmlinux, &bad).is_err());
        // A member whose type id points nowhere.
        let mut b = Builder::new(end, str_len)?;
        b.strct(b"queue", 8, &[(b"list", 999, 0)])?;
        let dangling = b.finish()?.0;
        let split = btf::Split::parse(&vmlinux, &dangling)?;
        assert!(compare(&split, &[field(b"queue", b"list", 0, 16)]).is_err());
        Ok(())
    }
}
