"""The simulator's report as a JSON file: the stable JSON text of
:mod:`kubescale.rendering.json_text`, shared with ``kubescale report``."""

from __future__ import annotations

from kubescale.rendering.json_text import dumps_report, write_json_report

__all__ = ["dumps_report", "write_json_report"]
