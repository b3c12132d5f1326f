"""Operator-grade CLI: every bad kubeconfig or flag is one line on stderr and a non-zero exit
(the real CLI as a subprocess for a case of each command that reaches its handler, ``main`` in
this process for the others); no prefix abbreviation anywhere; an unreachable API server is
reported once per backoff step, not once per request."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.kube.connection_report import ConnectionReport
from kubescale.kube.errors import KubeApiError, KubeTransportError, failure_log_level
from kubescale.kube.rate_limit import TokenBucket
from tests.cli.in_process import run_main

GUARD = 600.0
"""Seconds a child may take before the test fails: only a hung child gets there. No test here
bounds elapsed time (the suite runs on loaded machines; issue 32.7)."""
CHILDREN = 2
"""Children run at once: the machine's two cores; more only queue on a loaded machine."""
_UNREACHABLE = """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
"""
KUBECONFIGS = {
    # name: (file content or None for a missing file, what the one line must say)
    "missing": (None, "does not exist"),
    "not-yaml": ("clusters: [", "at line 1"),
    "empty": ("", "empty or not a YAML mapping"),
    "no-context": ("apiVersion: v1\nkind: Config\nclusters: []\n", "current-context"),
    "bad-server-url": (_UNREACHABLE.replace("https://127.0.0.1:1", "not a url"), "server URL"),
    "wrong-context": (_UNREACHABLE.replace("current-context: x", "current-context: y"), "y"),
    "unreachable": (_UNREACHABLE, "cannot reach the API server"),
}


async def _run(*args: str, home: Path, slots: asyncio.Semaphore) -> tuple[int, str, str]:
    async with slots:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kubescale", *args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "HOME": str(home), "KUBECONFIG": ""},
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), GUARD)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _run_here(
    *args: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, home: Path
) -> tuple[int, str, str]:
    """``kubescale ARGS`` in this process (:func:`tests.cli.in_process.run_main`), with the
    child's environment."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", "")
    done = run_main(args, capsys)
    return done.returncode, done.stdout, done.stderr


def _check(name: str, code: int, wanted: str, result: tuple[int, str, str]) -> None:
    returncode, out, err = result
    # the first lines of a serve log say which systems run and why (info level)
    lines = [line for line in err.strip().splitlines() if " INFO " not in line]
    assert returncode == code, (name, err)
    assert len(lines) == 1, (name, err)
    assert wanted in lines[0], (name, err)
    assert "Traceback" not in err, name
    assert out == "", name


def _cases(tmp_path: Path) -> list[tuple[str, list[str], int, str]]:
    """``(name, argv, exit code, what the one line must say)`` for every bad kubeconfig and
    flag."""
    cases: list[tuple[str, list[str], int, str]] = []
    for name, (content, wanted) in KUBECONFIGS.items():
        path = tmp_path / f"{name}.yaml"
        if content is not None:
            path.write_text(content, encoding="utf-8")
        # the report reads once and stops (serve keeps retrying an unreachable server)
        cases.append((f"report/{name}", ["report", "--kubeconfig", str(path)], 1, wanted))
    cases += [
        ("abbreviation", ["serve", "--min-rep", "2"], 2, "unrecognized arguments: --min-rep"),
        ("report abbreviation", ["report", "--all-work"], 2, "unrecognized arguments"),
        ("bad --v", ["serve", "--v", "loud"], 2, "argument -v/--v: invalid verbosity 'loud'"),
        ("bad qps", ["serve", "--kube-api-qps", "-1"], 2, "--kube-api-qps"),
        ("bad severity", ["serve", "--stderrthreshold", "x"], 2, "invalid severity"),
        ("bad output", ["report", "-o", "yaml"], 2, "invalid choice: 'yaml'"),
        ("bad duration", ["report", "--history-length", "8x"], 2, "--history-length"),
        (
            "serve missing kubeconfig",
            [
                "serve",
                "--kubeconfig",
                str(tmp_path / "nope.yaml"),
                "--tls-cert-file",
                str(tmp_path / "none.pem"),
            ],
            1,
            "none.pem",
        ),
    ]
    return cases


IN_A_CHILD = frozenset({"report/unreachable", "serve missing kubeconfig"})
"""The cases run as the real CLI in a child process: the entry point itself, for each command
that reaches its handler (``report`` up to its failed connection, ``serve`` up to its missing
certificate). The others run ``main`` in this process: the same parser and handlers, without
an interpreter start and the imports each child pays (about 2 s of CPU; issue 32.7)."""


async def test_bad_kubeconfigs_and_flags_are_one_line_and_non_zero_in_a_child(
    tmp_path: Path,
) -> None:
    cases = [case for case in _cases(tmp_path) if case[0] in IN_A_CHILD]
    assert len(cases) == len(IN_A_CHILD)
    slots = asyncio.Semaphore(CHILDREN)
    results = await asyncio.gather(
        *(_run(*args, home=tmp_path, slots=slots) for _, args, _, _ in cases)
    )
    for (name, _, code, wanted), result in zip(cases, results, strict=True):
        _check(name, code, wanted, result)


def test_bad_kubeconfigs_and_flags_are_one_line_and_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases = [case for case in _cases(tmp_path) if case[0] not in IN_A_CHILD]
    assert len(cases) == len(KUBECONFIGS) + 8 - len(IN_A_CHILD)
    for name, args, code, wanted in cases:
        result = _run_here(*args, capsys=capsys, monkeypatch=monkeypatch, home=tmp_path)
        _check(name, code, wanted, result)


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_no_parser_allows_abbreviation() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) >= 6  # kubescale and each subcommand
    assert [p.prog for p in parsers if p.allow_abbrev] == []


def test_upstream_flags_apply_or_are_reported_ignored() -> None:
    parser = build_parser()
    args = parser.parse_args(
        ["serve", "-v=4", "--kube-api-qps", "20", "--kube-api-burst", "30",
         "--logtostderr", "--log-dir", "/var/log", "--profiling=false"]
    )  # fmt: skip
    config = serve_config_from_args(args)
    assert config.log_level == "debug"  # klog -v=4: debug
    assert (config.kube_api_qps, config.kube_api_burst) == (20.0, 30)
    # --logtostderr (true) and --profiling=false are the defaults: nothing to report
    assert config.ignored_upstream_flags == (
        "--log-dir=/var/log (no log files: logs go to stderr)",
    )
    explicit = serve_config_from_args(
        parser.parse_args(["serve", "--v", "9", "--log-level", "warning"])
    )
    assert explicit.log_level == "warning"  # --log-level wins over --v
    assert serve_config_from_args(parser.parse_args(["serve", "--v", "2"])).log_level == "info"


def test_connection_report_one_line_per_backoff_step() -> None:
    report = ConnectionReport(server="https://api:6443", first_step=1.0, max_step=8.0)
    lines: list[tuple[float, str]] = []
    # a failed request every 0.1 s for 30 s: 300 failures
    for tick in range(300):
        now = tick / 10
        line = report.failure("connection refused", now=now)
        if line is not None:
            lines.append((now, line))
    # first at 0; then after each step: 1 (step 2 from 1.0), 3 (step 4), 7 (step 8), 15, 23
    assert [moment for moment, _ in lines] == [0.0, 1.0, 3.0, 7.0, 15.0, 23.0]
    assert "fail: connection refused; retrying with backoff" in lines[0][1]
    assert "(10 more failed requests" in lines[1][1]  # 0.1 .. 1.0
    recovered = report.success(now=30.0)
    assert recovered is not None
    assert "(300 failed requests)" in recovered
    assert report.success(now=31.0) is None  # nothing to say when nothing failed


async def test_token_bucket_is_client_gos() -> None:
    clock = VirtualClock()
    bucket = TokenBucket(qps=2.0, burst=3, clock=clock)
    started = clock.monotonic()
    done: list[float] = []

    async def take() -> None:
        await bucket.wait()
        done.append(clock.monotonic() - started)

    tasks = [asyncio.create_task(take()) for _ in range(6)]
    for _ in range(40):
        await clock.advance(0.1)
    await asyncio.gather(*tasks)
    # burst 3 at once, then one each 1/qps = 0.5 s
    assert [round(t, 3) for t in done] == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5]


def test_retries_of_an_unreachable_server_log_at_debug() -> None:
    # the informer and the transport log retries of an unreachable server at debug level
    assert failure_log_level(KubeTransportError("x")) == logging.DEBUG
    unauthorized = KubeApiError(code=401, reason="Unauthorized", message="")
    assert failure_log_level(unauthorized) == logging.DEBUG
    forbidden = KubeApiError(code=403, reason="Forbidden", message="")
    assert failure_log_level(forbidden, logging.WARNING) == logging.WARNING
