"""The flags every upstream component accepts (klog's and client-go's), accepted by ``serve`` too.

Operators replacing upstream keep the command lines of their Deployments: upstream VPA's
components, kube-controller-manager and the cluster autoscaler are all started with some of
``--v=4``, ``--logtostderr``, ``--stderrthreshold=info``, ``--kube-api-qps``... An unknown flag
would stop kubescale at start, so each is accepted, and:

applied
  ``--v N`` (klog verbosity, also ``-v``): 4 or more gives debug logs, less gives info, unless
  ``--log-level`` is given (then that wins). ``--kube-api-qps``/``--kube-api-burst``: the access
  layer's client-side token bucket (:mod:`kubescale.kube.rate_limit`). kubescale's default is
  0, no limit: one kubescale process does the work of five upstream components, each of which
  has its own budget (VPA's 50/100, kube-controller-manager's 20/30), so no single upstream
  default fits it.

accepted and ignored (logged once at start when set to something that would matter)
  ``--logtostderr`` (kubescale always logs to stderr), ``--alsologtostderr``, ``--log-dir``,
  ``--log-file``, ``--log-file-max-size``, ``--log-flush-frequency``, ``--vmodule``,
  ``--stderrthreshold``, ``--skip-headers``, ``--skip-log-headers``, ``--add-dir-header``,
  ``--one-output``, ``--log-backtrace-at``, ``--profiling`` (no ``/debug/pprof``; Python has no
  equivalent worth serving).

Values are still checked (``--v abc`` or ``--kube-api-qps -1`` is an error naming the flag).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Final

from kubescale.base.flag_types import parse_bool
from kubescale.base.go_time import parse_duration

__all__ = [
    "IGNORED_FLAGS",
    "UpstreamFlags",
    "add_upstream_arguments",
    "upstream_flags_from_args",
]

DEBUG_VERBOSITY: Final = 4
"""klog verbosity from which kubescale logs at debug level (upstream VPA's default, -v=4)."""
_SEVERITIES: Final = ("info", "warning", "error", "fatal", "0", "1", "2", "3")


def _verbosity(text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid verbosity {text!r} (want 0, 1, 2 ...)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"verbosity {value} is negative")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value


def _severity(text: str) -> str:
    if text.lower() not in _SEVERITIES:
        raise argparse.ArgumentTypeError(
            f"invalid severity {text!r} (want INFO, WARNING, ERROR, FATAL or 0-3)"
        )
    return text.lower()


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except (ValueError, argparse.ArgumentTypeError) as err:
        raise argparse.ArgumentTypeError(str(err)) from None


_BOOL: Final = {"type": parse_bool, "nargs": "?", "const": True, "metavar": "BOOL"}

IGNORED_FLAGS: Final = (
    ("--logtostderr", {**_BOOL, "default": True}, "always true: kubescale logs to stderr"),
    ("--alsologtostderr", {**_BOOL, "default": False}, "kubescale logs to stderr only"),
    ("--log-dir", {"default": "", "metavar": "DIR"}, "no log files: logs go to stderr"),
    ("--log-file", {"default": "", "metavar": "FILE"}, "no log files: logs go to stderr"),
    ("--log-file-max-size", {"type": _non_negative_int, "default": 1800, "metavar": "MB"}, ""),
    ("--log-flush-frequency", {"type": _duration, "default": 5.0, "metavar": "DURATION"}, ""),
    ("--vmodule", {"default": "", "metavar": "PATTERN=N,..."}, "no per-file verbosity"),
    ("--stderrthreshold", {"type": _severity, "default": "2", "metavar": "SEVERITY"}, ""),
    ("--skip-headers", {**_BOOL, "default": False}, ""),
    ("--skip-log-headers", {**_BOOL, "default": False}, ""),
    ("--add-dir-header", {**_BOOL, "default": False}, ""),
    ("--one-output", {**_BOOL, "default": False}, ""),
    ("--log-backtrace-at", {"default": "", "metavar": "FILE:LINE"}, ""),
    ("--profiling", {**_BOOL, "default": False}, "no /debug/pprof endpoint"),
)
"""Accepted for compatibility and ignored: (flag, argparse options, why it does not apply)."""


@dataclass(frozen=True, kw_only=True)
class UpstreamFlags:
    """What the upstream common flags change in kubescale."""

    verbosity: int | None
    """``--v``; None when not given."""
    kube_api_qps: float
    kube_api_burst: int
    ignored: tuple[str, ...] = ()
    """The ignored flags given with a value that would change upstream's behaviour, each as
    ``--flag=value (why)``; logged once at start."""

    def log_level(self, explicit: str | None) -> str | None:
        """The log level ``--v`` asks for, unless ``--log-level`` was given (``explicit``)."""
        if explicit is not None or self.verbosity is None:
            return explicit
        return "debug" if self.verbosity >= DEBUG_VERBOSITY else "info"


def add_upstream_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the upstream common flags on ``parser``."""
    group = parser.add_argument_group(
        "upstream common flags (klog, client-go): accepted so upstream command lines work; "
        "see kubescale.runtime.upstream_flags for which apply"
    )
    group.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=_verbosity,
        default=None,
        metavar="N",
        help="klog verbosity: 4 or more logs at debug level, less at info "
        "(--log-level wins when both are given)",
    )
    group.add_argument(
        "--kube-api-qps",
        type=_non_negative_float,
        default=0.0,
        metavar="QPS",
        help="client-side limit on requests a second to the API server; 0 for none (default: 0)",
    )
    group.add_argument(
        "--kube-api-burst",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="requests allowed at once above --kube-api-qps (default: max(1, qps))",
    )
    for flag, options, why in IGNORED_FLAGS:
        group.add_argument(
            flag,
            dest="upstream_" + flag[2:].replace("-", "_"),
            help=f"ignored{': ' + why if why else ''}",
            **options,
        )


def upstream_flags_from_args(args: argparse.Namespace) -> UpstreamFlags:
    """The settings of the upstream common flags (values were checked by argparse)."""
    ignored: list[str] = []
    for flag, options, why in IGNORED_FLAGS:
        value = getattr(args, "upstream_" + flag[2:].replace("-", "_"))
        if value != options.get("default"):
            ignored.append(f"{flag}={value}" + (f" ({why})" if why else ""))
    return UpstreamFlags(
        verbosity=args.verbosity,
        kube_api_qps=args.kube_api_qps,
        kube_api_burst=args.kube_api_burst,
        ignored=tuple(ignored),
    )
