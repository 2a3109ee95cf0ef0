#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""References to a heading of Documentation/ that does not exist.

  scripts/doc-refs.py [ROOT]

Code, scripts and the manual cite a section as a file name followed by the
heading in quotes: ``Documentation/design.rst, "Hazards"`` (the directory,
backquotes and a line break with its comment leader are optional, in the
heading too), or in the manual ``:doc:`design`, "Hazards"``. Each
cited heading must be a heading of that file, word for word. Prints every
reference that is not, with where it is; exits 1 if there is one. Reads
the files git tracks, as they are in the work tree.
"""

import os
import re
import subprocess
import sys

# A title line, then a line of one punctuation character repeated, at least
# as long as the title (reStructuredText's underline; an overline above is
# allowed and changes nothing).
UNDERLINE = re.compile(r"^([=\-~^\"'`#*+:.])\1{2,}\s*$")

# file.rst (optionally in backquotes and after directories) or, in the
# manual, :doc:`file`; then a comma or
# colon, then the heading in straight or typographic quotes. Between the
# two, a line break may carry a comment leader (//, //!, ///, *, #, ;).
# A line break, and the next line's comment leader if it has one.
BREAK = r"[ \t]*\n[ \t]*(?://[!/]?|\*|#|;)?[ \t]*"
REFERENCE = re.compile(
    r"(?:(?P<file>(?:[A-Za-z0-9_-]+/)*[A-Za-z0-9_-]+\.rst)`?|:doc:`/?(?P<doc>[A-Za-z0-9_/-]+)`)[,:]?"
    rf"(?:{BREAK})?[ \t]*"
    r"\\?[\"\u201c](?P<heading>[A-Za-z0-9`'][^\"\u201d\n]*"
    rf"(?:{BREAK}[^\"\u201d\n]+)?)\\?[\"\u201d]"
)
# A line break inside a cited heading, read as a space.
WRAP = re.compile(BREAK)

SKIP_SUFFIXES = (".png", ".svg", ".gz", ".ko", ".o", ".bin")


def headings(path):
    """The set of section titles of an rst file."""
    lines = open(path, encoding="utf-8").read().splitlines()
    found = set()
    for i in range(1, len(lines)):
        title = lines[i - 1].strip()
        if (
            title
            and UNDERLINE.match(lines[i])
            and len(lines[i].strip()) >= len(title)
            and not UNDERLINE.match(lines[i - 1])
        ):
            found.add(title)
    return found


def tracked_files(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True
    ).stdout
    return [f for f in out.decode().split("\0") if f and not f.endswith(SKIP_SUFFIXES)]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    docs = os.path.join(root, "Documentation")
    # Keyed by the path under Documentation/ ("design.rst",
    # "results/bench.rst").
    titles = {}
    for top, _, names in os.walk(docs):
        for name in names:
            if name.endswith(".rst"):
                path = os.path.join(top, name)
                titles[os.path.relpath(path, docs)] = headings(path)
    bad = 0
    checked = 0
    for f in tracked_files(root):
        path = os.path.join(root, f)
        if not os.path.isfile(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        for m in REFERENCE.finditer(text):
            name = m.group("file") or m.group("doc") + ".rst"
            name = name.removeprefix("Documentation/")
            if name not in titles and os.path.basename(name) in titles:
                name = os.path.basename(name)
            heading = WRAP.sub(" ", m.group("heading")).removesuffix("\\")
            if name not in titles:
                # Another project's file (the kernel's own Documentation/).
                continue
            checked += 1
            if heading not in titles[name]:
                line = text.count("\n", 0, m.start()) + 1
                print(f'{f}:{line}: {name} has no heading "{heading}"')
                bad += 1
    print(f"doc-refs: {checked} references to headings, {bad} dead", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
