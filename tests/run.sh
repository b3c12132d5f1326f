#!/usr/bin/env bash
# The one test command (README, .ci/run): installs kubescale with its test extras into .venv,
# then runs ruff, mypy --strict and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "kubescale needs Python >= 3.11 (python3 is $(python3 --version))" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
echo "== mypy --strict"
.venv/bin/mypy
echo "== pytest"
.venv/bin/python -m pytest "$@"
