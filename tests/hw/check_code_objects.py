#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check the hardware kit's GPU code objects by what the HSA loader reads.

A successful compile proves little about what a GPU will load. For each
<workload>-<gfx>.co this reads the ELF header, the NT_AMDGPU_METADATA note
(MessagePack) and the kernel descriptors, and checks that:

  * it is an AMDGPU HSA object of code object version 5 for that gfx target
    (e_flags machine, amdhsa.target, amdhsa.version);
  * it holds exactly the kernels the kit dispatches, with the argument list
    the host code fills (no hidden arguments: the kit's raw AQL dispatcher
    does not write them);
  * each kernel's descriptor (<name>.kd, 64 bytes) agrees with the metadata
    (group, private and kernarg sizes, wavefront size) and its entry offset
    lands on the kernel's code.

Prints one KTAP line per object and "N passed, M failed".
usage: check_code_objects.py DIR
"""

import os
import struct
import sys

EM_AMDGPU = 224
ELFOSABI_AMDGPU_HSA = 64
ABI_VERSION_COV5 = 3
NT_AMDGPU_METADATA = 32
EF_AMDGPU_MACH = 0xFF
MACH = {"gfx90a": 0x03F, "gfx942": 0x04C, "gfx1100": 0x041, "gfx1200": 0x048}

# What the host code (tests/hw/gpu.c) passes: the value kinds of each
# kernel's arguments, in order.
KERNELS = {
    "spin": ["global_buffer", "global_buffer"],
    "checksum": ["global_buffer", "dynamic_shared_pointer", "by_value"],
    "coop": ["global_buffer", "by_value", "by_value", "by_value"],
    "stamp": ["global_buffer", "by_value"],
}
NO_GWS = {"gfx1200"}  # coop is not built for these


def msgpack(buf, pos=0):
    """Decodes one MessagePack value (the subset the metadata uses)."""
    b = buf[pos]
    pos += 1
    if b <= 0x7F:
        return b, pos
    if b >= 0xE0:
        return b - 0x100, pos
    if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
        n, pos = _count(buf, pos, b, 0x80)
        out = {}
        for _ in range(n):
            k, pos = msgpack(buf, pos)
            out[k], pos = msgpack(buf, pos)
        return out, pos
    if 0x90 <= b <= 0x9F or b in (0xDC, 0xDD):
        n, pos = _count(buf, pos, b, 0x90)
        out = []
        for _ in range(n):
            v, pos = msgpack(buf, pos)
            out.append(v)
        return out, pos
    if 0xA0 <= b <= 0xBF or b in (0xD9, 0xDA, 0xDB):
        if b <= 0xBF:
            n = b - 0xA0
        else:
            size = {0xD9: 1, 0xDA: 2, 0xDB: 4}[b]
            n = int.from_bytes(buf[pos:pos + size], "big")
            pos += size
        return buf[pos:pos + n].decode(), pos + n
    if b in (0xC2, 0xC3):
        return b == 0xC3, pos
    fmt = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
           0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}.get(b)
    if fmt is None:
        raise ValueError(f"unsupported MessagePack type 0x{b:02x}")
    size = struct.calcsize(fmt)
    return struct.unpack_from(fmt, buf, pos)[0], pos + size


def _count(buf, pos, b, fix):
    if b < 0xC0:
        return b - fix, pos
    size = 2 if b in (0xDE, 0xDC) else 4
    return int.from_bytes(buf[pos:pos + size], "big"), pos + size


class Elf:
    def __init__(self, data):
        if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
            raise ValueError("not a little-endian ELF64 file")
        self.data = data
        self.osabi, self.abiversion = data[7], data[8]
        (self.machine, self.flags, shoff, shentsize, shnum) = (
            struct.unpack_from("<H", data, 18)[0],
            struct.unpack_from("<I", data, 48)[0],
            struct.unpack_from("<Q", data, 40)[0],
            struct.unpack_from("<H", data, 58)[0],
            struct.unpack_from("<H", data, 60)[0],
        )
        self.sections = []
        for i in range(shnum):
            f = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
            self.sections.append(dict(type=f[1], addr=f[3], offset=f[4],
                                      size=f[5], link=f[6], entsize=f[9]))

    def notes(self):
        for s in self.sections:
            if s["type"] != 7:  # SHT_NOTE
                continue
            pos, end = s["offset"], s["offset"] + s["size"]
            while pos + 12 <= end:
                namesz, descsz, ntype = struct.unpack_from("<III", self.data, pos)
                pos += 12
                name = self.data[pos:pos + namesz].rstrip(b"\0").decode()
                pos += (namesz + 3) & ~3
                yield name, ntype, self.data[pos:pos + descsz]
                pos += (descsz + 3) & ~3

    def symbols(self):
        out = {}
        for s in self.sections:
            if s["type"] != 2:  # SHT_SYMTAB
                continue
            strtab = self.sections[s["link"]]
            for i in range(s["size"] // 24):
                name, info, _, shndx, value, size = struct.unpack_from(
                    "<IBBHQQ", self.data, s["offset"] + i * 24)
                end = self.data.index(b"\0", strtab["offset"] + name)
                out[self.data[strtab["offset"] + name:end].decode()] = dict(
                    type=info & 0xF, shndx=shndx, value=value, size=size)
        return out

    def read_at(self, shndx, vaddr, size):
        s = self.sections[shndx]
        off = s["offset"] + vaddr - s["addr"]
        return self.data[off:off + size]


def check(path, workload, gfx):
    """Returns a list of problems (empty if the object is right)."""
    elf = Elf(open(path, "rb").read())
    bad = []
    if elf.machine != EM_AMDGPU or elf.osabi != ELFOSABI_AMDGPU_HSA:
        bad.append(f"machine {elf.machine}, OS ABI {elf.osabi}: not AMDGPU HSA")
    if elf.abiversion != ABI_VERSION_COV5:
        bad.append(f"ABI version {elf.abiversion}: not code object v5")
    if elf.flags & EF_AMDGPU_MACH != MACH[gfx]:
        bad.append(f"e_flags machine 0x{elf.flags & EF_AMDGPU_MACH:03x}, want 0x{MACH[gfx]:03x} ({gfx})")
    meta = [d for n, t, d in elf.notes() if n == "AMDGPU" and t == NT_AMDGPU_METADATA]
    if len(meta) != 1:
        return bad + [f"{len(meta)} NT_AMDGPU_METADATA notes"]
    md, _ = msgpack(meta[0])
    if md.get("amdhsa.target") != f"amdgcn-amd-amdhsa--{gfx}":
        bad.append(f"amdhsa.target {md.get('amdhsa.target')!r}")
    if md.get("amdhsa.version") != [1, 2]:
        bad.append(f"amdhsa.version {md.get('amdhsa.version')} (v5 is [1, 2])")
    kernels = md.get("amdhsa.kernels", [])
    if [k.get(".name") for k in kernels] != [workload]:
        return bad + [f"kernels {[k.get('.name') for k in kernels]}, want [{workload!r}]"]
    k = kernels[0]
    kinds = [a.get(".value_kind") for a in k.get(".args", [])]
    if kinds != KERNELS[workload]:
        bad.append(f"arguments {kinds}, the host passes {KERNELS[workload]}")
    syms = elf.symbols()
    kd, code = syms.get(k.get(".symbol", "")), syms.get(workload)
    if kd is None or kd["type"] != 1 or kd["size"] != 64:  # STT_OBJECT
        return bad + [f"no 64-byte kernel descriptor {k.get('.symbol')!r}"]
    if code is None or code["type"] != 2:  # STT_FUNC
        return bad + [f"no code symbol {workload!r}"]
    desc = elf.read_at(kd["shndx"], kd["value"], 64)
    group, private, kernarg = struct.unpack_from("<III", desc, 0)
    entry = struct.unpack_from("<q", desc, 16)[0]
    properties = struct.unpack_from("<H", desc, 56)[0]
    for what, got, want in (
        ("group segment", group, k.get(".group_segment_fixed_size")),
        ("private segment", private, k.get(".private_segment_fixed_size")),
        ("kernarg size", kernarg, k.get(".kernarg_segment_size")),
        ("wavefront size", 32 if properties & (1 << 10) else 64, k.get(".wavefront_size")),
    ):
        if got != want:
            bad.append(f"descriptor {what} {got}, metadata {want}")
    if kd["value"] + entry != code["value"]:
        bad.append(f"descriptor entry 0x{kd['value'] + entry:x}, code at 0x{code['value']:x}")
    if k.get(".private_segment_fixed_size") or k.get(".uses_dynamic_stack"):
        bad.append("uses scratch: the kit's queues are created without it")
    return bad


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1])
        return 2
    expected = [(w, g) for w in KERNELS for g in MACH
                if not (w == "coop" and g in NO_GWS)]
    print("TAP version 13")
    print(f"1..{len(expected)}")
    passed = failed = 0
    for i, (w, g) in enumerate(expected, 1):
        path = os.path.join(argv[1], f"{w}-{g}.co")
        try:
            bad = check(path, w, g)
        except (OSError, ValueError, IndexError, KeyError, struct.error) as e:
            bad = [str(e)]
        for b in bad:
            print(f"# {w}-{g}.co: {b}")
        print(f"{'not ok' if bad else 'ok'} {i} code_object_{w}_{g}")
        passed, failed = passed + (not bad), failed + bool(bad)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
