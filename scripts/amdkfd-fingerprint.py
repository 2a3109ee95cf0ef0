#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Fingerprint the amdkfd code kfd_preempt's glue depends on, and compare it
with what was reviewed (Documentation/design.rst, "amdgpu identity").

The glue reads amdkfd's private structs and copies or relies on the bodies
of a few amdkfd functions. A layout or semantic change there must not reach
an operator's host unreviewed, so the build hashes each of them, from the
amdgpu source it compiles against (AMDGPU_SRC), comments and whitespace
removed, and compares with src/glue/amdkfd-reviewed.txt.

That file holds one reviewed set per amdkfd version, each headed by a line
"[NAME]" (e.g. [7.3.4]). A source passes only if all its fingerprints
equal one set's: every item of one version, not a mix of versions, was
reviewed together.

  amdkfd-fingerprint.py print AMDGPU_SRC           the current fingerprints
  amdkfd-fingerprint.py check AMDGPU_SRC REVIEWED OUT_HEADER
        writes OUT_HEADER (naming the set matched), or fails naming every
        item that differs from the closest set; with
        KFDP_ALLOW_UNREVIEWED_AMDKFD=1 it writes the header anyway, and the
        module logs what was not reviewed at load
"""

import hashlib
import os
import re
import sys

# (kind, file under AMDGPU_SRC, name): every definition the glue depends on.
ITEMS = [
    ("struct", "amdkfd/kfd_priv.h", "kfd_node"),
    ("struct", "amdkfd/kfd_priv.h", "kfd_dev"),
    ("struct", "amdkfd/kfd_priv.h", "queue_properties"),
    ("struct", "amdkfd/kfd_priv.h", "queue"),
    ("struct", "amdkfd/kfd_priv.h", "qcm_process_device"),
    ("struct", "amdkfd/kfd_priv.h", "kfd_process_device"),
    ("struct", "amdkfd/kfd_priv.h", "kfd_process"),
    ("macro", "amdkfd/kfd_priv.h", "QUEUE_IS_ACTIVE"),
    ("macro", "amdkfd/kfd_priv.h", "qpd_to_pdd"),
    ("struct", "amdkfd/kfd_device_queue_manager.h", "device_process_node"),
    ("struct", "amdkfd/kfd_device_queue_manager.h", "device_queue_manager_ops"),
    ("struct", "amdkfd/kfd_device_queue_manager.h", "device_queue_manager"),
    ("function", "amdkfd/kfd_device_queue_manager.h", "dqm_lock"),
    ("function", "amdkfd/kfd_device_queue_manager.h", "dqm_unlock"),
    ("struct", "include/kgd_kfd_interface.h", "kgd2kfd_shared_resources"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "increment_queue_count"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "decrement_queue_count"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "update_queue"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "suspend_single_queue"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "resume_single_queue"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "evict_process_queues_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "restore_process_queues_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "map_queues_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "unmap_queues_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "set_queue_as_reset"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "kfd_hws_hang"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "execute_queues_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "process_termination_cpsch"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "dqm_evict_mqd_bo"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "dqm_repin_mqd_bo"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "remove_queue_mes_on_reset_option"),
    ("function", "amdkfd/kfd_device_queue_manager.c", "add_queue_mes"),
    ("function", "amdkfd/kfd_chardev.c", "kfd_open"),
    ("function", "amdkfd/kfd_chardev.c", "kfd_release"),
    ("function", "amdkfd/kfd_process.c", "kfd_process_notifier_release_internal"),
    ("function", "amdkfd/kfd_process_queue_manager.c", "pqm_uninit"),
]

COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def is_definition(lines, i):
    """Does the declaration starting at line @i have a body (a '{' before any ';')?"""
    for line in lines[i:i + 20]:
        for c in line:
            if c == ";":
                return False
            if c == "{":
                return True
    return False


def extract(kind, text, name):
    """The definition's text, or None if it is not in @text."""
    lines = text.split("\n")
    if kind == "struct":
        start = re.compile(r"^struct %s \{" % re.escape(name))
        end = re.compile(r"^\};")
    elif kind == "function":
        # A definition starts at column 0 and its body's brace follows.
        start = re.compile(r"^[A-Za-z_][\w \*]*\b%s\([^;]*$" % re.escape(name))
        end = re.compile(r"^\}")
    else:
        start = re.compile(r"^#define %s\(" % re.escape(name))
        end = None
    for i, line in enumerate(lines):
        if not start.match(line):
            continue
        if kind == "function" and not is_definition(lines, i):
            continue	# a prototype spanning lines
        j = i
        if end is None:
            while lines[j].endswith("\\") and j + 1 < len(lines):
                j += 1
        else:
            while j < len(lines) and not end.match(lines[j]):
                j += 1
        return "\n".join(lines[i:j + 1])
    return None


def fingerprint(src, kind, path, name):
    try:
        with open(os.path.join(src, path), encoding="utf-8", errors="replace") as f:
            body = extract(kind, f.read(), name)
    except OSError:
        body = None
    if body is None:
        return "missing"
    norm = " ".join(COMMENT.sub(" ", body).split())
    return hashlib.sha256(norm.encode()).hexdigest()[:16]


def current(src):
    return {(k, p, n): fingerprint(src, k, p, n) for k, p, n in ITEMS}


def load_reviewed(path):
    """The reviewed sets, {name: {item: digest}}, in file order."""
    sets = {}
    current_set = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("[") and line.endswith("]"):
                if line[1:-1] in sets:
                    raise SystemExit(f"{path}: [{line[1:-1]}] appears twice")
                current_set = sets[line[1:-1]] = {}
                continue
            if current_set is None:
                raise SystemExit(f"{path}: an item before the first [NAME] line")
            kind, file, name, digest = line.split()
            current_set[(kind, file, name)] = digest
    return sets


def differences(now, reviewed_set):
    return [f"{k} {n} ({p})" for (k, p, n), d in now.items()
            if reviewed_set.get((k, p, n)) != d]


def main(argv):
    if len(argv) == 3 and argv[1] == "print":
        for (k, p, n), d in current(argv[2]).items():
            print(f"{k} {p} {n} {d}")
        return 0
    if len(argv) != 5 or argv[1] != "check":
        print(__doc__, file=sys.stderr)
        return 2
    src, reviewed_path, out = argv[2], argv[3], argv[4]
    sets = load_reviewed(reviewed_path)
    if not sets:
        raise SystemExit(f"{reviewed_path}: no reviewed set")
    now = current(src)
    # The set this source matches, else the closest one, to name what differs.
    matched, changed = min(((name, differences(now, rs)) for name, rs in sets.items()),
                           key=lambda nc: len(nc[1]))
    allow = os.environ.get("KFDP_ALLOW_UNREVIEWED_AMDKFD") == "1"
    if changed and not allow:
        print("kfd_preempt: the amdkfd code the glue depends on differs from every "
              f"reviewed version ({reviewed_path}); from the closest, {matched}:",
              file=sys.stderr)
        for c in changed:
            print(f"kfd_preempt:   {c}", file=sys.stderr)
        print("kfd_preempt: review them against src/glue (Documentation/design.rst, "
              "\"Rebasing\"), then add them as a new set: a \"[VERSION]\" line and\n"
              f"kfd_preempt:   {argv[0]} print {src} >> {reviewed_path}\n"
              "kfd_preempt: or build anyway at your own risk with "
              "KFDP_ALLOW_UNREVIEWED_AMDKFD=1 (logged at load)", file=sys.stderr)
        return 1
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("/* SPDX-License-Identifier: GPL-2.0 */\n")
        f.write("/* Generated by scripts/amdkfd-fingerprint.py; do not edit. */\n")
        f.write('#define KFDP_AMDKFD_UNREVIEWED "%s"\n' % ", ".join(changed))
        f.write('#define KFDP_AMDKFD_REVIEWED_AS "%s"\n' % ("" if changed else matched))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
