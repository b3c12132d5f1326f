"""Logging set-up: text or JSON lines on stderr, each naming its component.

Components log through ``logging.getLogger("kubescale.<component>")`` (e.g. ``kubescale.runner``);
the component field is the logger name without the ``kubescale.`` prefix. Extra fields passed as
``logger.info("...", extra={"fields": {...}})`` are rendered as ``key=value`` (text) or as
JSON keys.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

LogFormat = Literal["text", "json"]
LOG_LEVELS = ("debug", "info", "warning", "error")
ROOT_LOGGER = "kubescale"


def component_logger(component: str) -> logging.Logger:
    """The logger of one component (``runner``, ``tls``, ``webhook`` ...)."""
    return logging.getLogger(f"{ROOT_LOGGER}.{component}")


def _component(record: logging.LogRecord) -> str:
    name = record.name
    if name == ROOT_LOGGER:
        return "main"
    if name.startswith(ROOT_LOGGER + "."):
        return name[len(ROOT_LOGGER) + 1 :]
    return name


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


class TextFormatter(logging.Formatter):
    """``2026-11-21T05:52:48.123Z INFO    runner: message key=value``."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [
            _timestamp(record),
            f"{record.levelname:<7}",
            f"{_component(record)}: {record.getMessage()}",
        ]
        line = " ".join(parts)
        extras = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        if extras:
            line = f"{line} {extras}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, component, msg, fields, and exc when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "component": _component(record),
            "msg": record.getMessage(),
        }
        for key, value in _fields(record).items():
            payload.setdefault(key, value)
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, separators=(",", ":"))


def configure_logging(*, level: str, fmt: LogFormat, stream: TextIO | None = None) -> None:
    """Route the ``kubescale`` and library loggers to one handler in the chosen format."""
    if level not in LOG_LEVELS:
        raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT_LOGGER).setLevel(level.upper())
    # aiohttp's access log is per request: too chatty for a webhook at info.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
