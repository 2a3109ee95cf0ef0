#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
# Build the Python package kfd_preempt (userspace/python, PyO3 + maturin;
# Documentation/python.rst) and what its tests need:
#   out/python/wheels/   the abi3 wheel (CPython 3.9 and later), what an
#                        operator gives to pip install
#   $KFDP_CACHE/python-venv
#                        maturin, pytest and mypy (pinned), with the wheel
#                        installed as pip installs it: the host's tests
#                        import it from there
#   out/python/vm/       a tree tests/vm/run lays over the VM's root: the
#                        host's Debian CPython and its standard library,
#                        the wheel and pytest installed in /kfdp/python/site,
#                        the tests in /kfdp/python/tests
#   out/kselftest/python_test
#                        the KTAP program that runs them in the VM
set -euo pipefail
. "$(dirname "$0")/lib.sh"

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.0.2
MYPY_VERSION=1.19.1

py=$KFDP_ROOT/userspace/python
out=$KFDP_ROOT/out/python
venv=$KFDP_CACHE/python-venv
mkdir -p "$out" "$KFDP_ROOT/out/kselftest"

# The tools, once per version pair.
# (A venv made by another interpreter, since upgraded or gone, is made
# again: the stamp names the interpreter too.)
stamp=$venv/.kfdp-$(python3 -c 'import sys; print(sys.version.split()[0])')-maturin-$MATURIN_VERSION-pytest-$PYTEST_VERSION-mypy-$MYPY_VERSION
if [ ! -e "$stamp" ] || ! "$venv/bin/python" -c '' 2>/dev/null; then
	rm -rf "$venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check \
		"maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" "mypy==$MYPY_VERSION"
	touch "$stamp"
fi

# The wheel: a plain linux tag (the host's glibc), as it is built for the
# hosts it runs on, not uploaded to PyPI.
rm -rf "$out/wheels"
(cd "$py" && "$venv/bin/maturin" build --release --quiet --compatibility linux \
	--out "$out/wheels")
wheel=$(ls "$out"/wheels/kfd_preempt-*.whl)
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"

# The VM's Python: Debian's interpreter, whose standard library sits at a
# fixed prefix (/usr) that the same path in the VM keeps. Without what a
# test never imports: the static library, tkinter, IDLE, the test suite.
vm=$out/vm
rm -rf "$vm"
host_python=$(readlink -f /usr/bin/python3)
[ -x "$host_python" ] || kfdp_die "no /usr/bin/python3 (Debian's python3-minimal) for the VM"
version=$("$host_python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
mkdir -p "$vm/usr/bin" "$vm/usr/lib" "$vm/kfdp/python"
cp "$host_python" "$vm/usr/bin/python3"
rsync -a --exclude 'config-*' --exclude test --exclude tkinter --exclude idlelib \
	--exclude turtledemo --exclude ensurepip --exclude lib2to3 --exclude pydoc_data \
	--exclude dist-packages --exclude site-packages \
	"/usr/lib/python$version/" "$vm/usr/lib/python$version/"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-compile \
	--python-version "$version" --only-binary=:all: \
	--target "$vm/kfdp/python/site" "$wheel" "pytest==$PYTEST_VERSION"
mkdir -p "$vm/kfdp/python/tests"
cp "$py"/tests/*.py "$vm/kfdp/python/tests/"
install -m 0755 "$KFDP_ROOT/tests/vm/python_test.sh" "$KFDP_ROOT/out/kselftest/python_test"
kfdp_log "python: $(basename "$wheel"), VM tree $(du -sh "$vm" | cut -f1) (Python $version)"
