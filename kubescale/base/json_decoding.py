"""JSON bodies from the API server, decoded by orjson where it can.

The informers decode every object of every LIST page and watch event; the standard library's
decoder was, after the projection, the largest CPU cost of a 50,000-pod initial sync
(``bench/informer_sync.py``, issue 29). orjson (a dependency already, the webhook's codec)
decodes the same documents to the same values, faster. What orjson refuses but the standard
library reads — ``NaN``/``Infinity``, a lone surrogate escape, a UTF-8 byte-order mark or a
UTF-16/32 body — is decoded by the standard library, so the result (and every error: a
``ValueError``) is the standard library's.

One difference is kept: an integer beyond 64 bits reads as a float (the standard library keeps
an exact ``int``). kube-apiserver never sends one: its own decoding of objects
(``sigs.k8s.io/json``, ``UnmarshalCaseSensitivePreserveInts``) reads a JSON integer "as an
int64 ... falling back to float64 on any parse or overflow error", so what it stores and serves
is already that float.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["decode_json"]


def decode_json(body: bytes | bytearray | str) -> Any:
    """``json.loads(body)``, by orjson when it can (module docstring)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)
