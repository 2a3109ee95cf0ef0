#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Print the preprocessor flags an amdkfd object of ROCm's amdgpu-dkms was
compiled with, for kfd_preempt's glue to be compiled the same way
(Documentation/building.rst, "ROCm's amdgpu-dkms").

  amdgpu-dkms-flags.py CMD_FILE TREE

CMD_FILE is the .*.o.cmd kbuild wrote for one amdkfd object built in TREE,
the prepared copy of /usr/src/amdgpu-<version>. Its command line lists the
package's own include directories and forced includes (config.h,
rename_symbol.h, backport.h) before the kernel's; kbuild's c_flags puts
NOSTDINC_FLAGS before LINUXINCLUDE, so the glue gets these flags there, in
the same order, and they win over the kernel's headers as they do for
amdkfd.

Kept, in their order: -I/-iquote/-isystem directories and -include/-imacros
files inside TREE (paths made absolute: the compiler ran in TREE, the
module's own build runs elsewhere), and every -D/-U except kbuild's
per-object names (KBUILD_*, MODULE). The kernel's own directories and
files are dropped: the glue's command line has them already.

Output: one line of shell-quoted flags (kbuild passes them to the shell).
Fails, saying why, when the file holds no compiler command or no flag of
the package's own tree.
"""

import os
import shlex
import sys

PATH_FLAGS = ("-I", "-iquote", "-isystem", "-include", "-imacros")
PER_OBJECT_DEFINES = ("KBUILD_", "__KBUILD_", "MODULE")


def command_line(cmd_file):
    """The compiler command kbuild saved: 'savedcmd_<target> := <command>'."""
    with open(cmd_file, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("savedcmd_", "cmd_")) and " := " in line:
                return line.split(" := ", 1)[1].strip()
    return None


def split_path_flag(tokens, i):
    """(flag, path, tokens consumed) for a path flag at tokens[i], or None."""
    tok = tokens[i]
    for flag in PATH_FLAGS:
        if tok == flag:
            if i + 1 < len(tokens):
                return flag, tokens[i + 1], 2
            return None
        # -Idir is one token; -include and -imacros always take a second.
        if flag in ("-I", "-iquote", "-isystem") and tok.startswith(flag) and len(tok) > len(flag):
            return flag, tok[len(flag):], 1
    return None


def source_dir(tokens, tree):
    """Where the compiler ran, if that was TREE: Linux 6.13 and later run an
    external module's compiles in its directory, so the compiled .c is
    named relative to TREE. Otherwise (None) relative paths are the
    kernel's, and the package's own are absolute."""
    sources = [t for t in tokens if t.endswith(".c") and not t.startswith("-")]
    if sources and not os.path.isabs(sources[-1]) \
            and os.path.exists(os.path.join(tree, sources[-1])):
        return tree
    return None


def package_flags(cmd, tree):
    tree = os.path.realpath(tree)
    tokens = shlex.split(cmd)
    cwd = source_dir(tokens, tree)
    kept = []
    i = 0
    while i < len(tokens):
        path_flag = split_path_flag(tokens, i)
        if path_flag:
            flag, path, used = path_flag
            i += used
            if not os.path.isabs(path):
                if cwd is None:
                    continue
                path = os.path.join(cwd, path)
            path = os.path.realpath(path)
            if path == tree or path.startswith(tree + os.sep):
                kept += [flag, path] if flag in ("-include", "-imacros") else [flag + path]
            continue
        tok = tokens[i]
        i += 1
        if tok in ("-D", "-U") and i < len(tokens):
            tok += tokens[i]
            i += 1
        if tok.startswith(("-D", "-U")) and not tok[2:].startswith(PER_OBJECT_DEFINES):
            kept.append(tok)
    return kept


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: amdgpu-dkms-flags.py CMD_FILE TREE\n")
        return 2
    cmd_file, tree = argv[1], argv[2]
    try:
        cmd = command_line(cmd_file)
    except OSError as e:
        sys.stderr.write(f"amdgpu-dkms-flags.py: {cmd_file}: {e.strerror}\n")
        return 1
    if not cmd:
        sys.stderr.write(f"amdgpu-dkms-flags.py: {cmd_file} holds no compiler command\n")
        return 1
    flags = package_flags(cmd, tree)
    if not any(f.startswith(("-I", "-include", "-imacros", "-iquote", "-isystem")) for f in flags):
        sys.stderr.write(
            f"amdgpu-dkms-flags.py: the command in {cmd_file} names nothing of {tree}: "
            "not an object of that tree\n")
        return 1
    print(" ".join(shlex.quote(f) for f in flags))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
