#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build Documentation/ as HTML into out/docs with Sphinx, every warning an
# error. Sphinx comes from PyPI into a virtual environment cached outside
# the repository (installed once, pinned).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

sphinx_version=9.0.4
venv=$KFDP_CACHE/sphinx-$sphinx_version
if [ ! -x "$venv/bin/sphinx-build" ]; then
	kfdp_log "docs: installing Sphinx $sphinx_version into $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check "sphinx==$sphinx_version"
fi
rm -rf "$KFDP_ROOT/out/docs"
"$venv/bin/sphinx-build" -q -W --keep-going -b html "$KFDP_ROOT/Documentation" \
	"$KFDP_ROOT/out/docs"
kfdp_log "docs: $KFDP_ROOT/out/docs/index.html"
