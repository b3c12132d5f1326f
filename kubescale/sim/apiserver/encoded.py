"""Each stored object's JSON as a LIST item, encoded once and reused until the object changes.

kube-apiserver serves LISTs from its watch cache and encodes every page anew (in Go); this
server is Python, and encoding every item of every 500-item page dominated the initial sync of
a large simulated cluster (issue 29: ``bench/informer_sync.py`` counts the server's CPU apart
from the client's). A stored object never changes after it is written (:mod:`.storage`), so
its encoding is kept next to it, keyed by its storage key and valid only while that very dict
is the stored one: :meth:`EncodedObjects.forget` drops it on every write and removal, and an
entry whose object is not the stored one (an older snapshot a paged LIST still reads, an
object swapped in another way) is never served. A page is then the items' bytes joined.

Items are encoded by orjson (compact, UTF-8: what Go's ``encoding/json`` writes), the standard
library for the values orjson refuses (an integer beyond 64 bits); both decode to the same
value. Items of built-in kinds carry no ``apiVersion``/``kind`` in a LIST (as kube).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

__all__ = ["EncodedObjects", "encode_json", "list_bytes"]

_Key = tuple[tuple[str, str], str, str]
"""``((group, plural), namespace, name)``: where the object is stored."""
_TYPE_FIELDS = ("apiVersion", "kind")


def encode_json(value: Any) -> bytes:
    """Compact JSON of ``value``: orjson, or the standard library for what orjson refuses."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, separators=(",", ":")).encode()


class EncodedObjects:
    """The LIST-item encoding of the stored objects (module docstring)."""

    def __init__(self) -> None:
        self._items: dict[_Key, tuple[Mapping[str, Any], bytes]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def forget(self, resource: tuple[str, str], namespace: str, name: str) -> None:
        """The object at this key was written or removed: its encoding is stale."""
        self._items.pop((resource, namespace, name), None)

    def item(
        self,
        key: _Key,
        obj: Mapping[str, Any],
        *,
        stored: Mapping[str, Any] | None,
        builtin: bool,
    ) -> bytes:
        """``obj`` as a LIST item; kept when ``obj`` is ``stored`` (the object at ``key`` now)."""
        found = self._items.get(key)
        if found is not None and found[0] is obj:
            return found[1]
        if builtin:
            encoded = encode_json({k: v for k, v in obj.items() if k not in _TYPE_FIELDS})
        else:
            encoded = encode_json(obj)
        if stored is obj:
            # orjson's result keeps the capacity it grew to (RSS ~3x the JSON's length when
            # 12k encodings are kept, bench/informer_sync.py): keep an exact-size copy.
            encoded = bytes(memoryview(encoded))
            self._items[key] = (obj, encoded)
        return encoded


def list_bytes(
    *, kind: str, api_version: str, metadata: Mapping[str, Any], items: Iterable[bytes]
) -> bytes:
    """The ``<Kind>List`` document with already encoded items, fields in kube's order."""
    head = encode_json({"kind": kind, "apiVersion": api_version, "metadata": metadata})
    return head[:-1] + b',"items":[' + b",".join(items) + b"]}"
