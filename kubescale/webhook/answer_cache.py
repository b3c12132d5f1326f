"""Whole pod answers by request body: a ReplicaSet's pods arrive as one body but for the uid.

kube-apiserver sends every pod of a ReplicaSet as the same AdmissionReview bytes except
``request.uid`` (the pod's name is generated later, its uid is empty). The match and decision
caches (:mod:`kubescale.controllers.vpa.admission`) already make such a pod a lookup, but
reading the JSON and walking both caches is still most of a request's CPU time on a loaded
core. :class:`AnswerCache` remembers the finished answer bytes under the body with the uid cut
out (:func:`split_uid`), and splices the next request's uid in.

When an answer is served from here:

- **The same question.** The key is the whole body but the value of the first ``"uid":``
  field. An answer is remembered only when that field *is* ``request.uid``: the body is read
  again with a probe value there, and must come back with the probe as its uid. So a body with
  the same key differs from the remembered one only in ``request.uid``. A uid that is not plain
  printable ASCII (no quote, no backslash) is never cut, so the spliced bytes are exactly what
  the JSON encoder writes for it.
- **The same inputs.** The decision was made with a match from the match cache (the top-most
  controller and the VPA), and the answer is used only while :meth:`MatchCache.get` still gives
  that very entry — it checks every controller object and the VPA list it was made from against
  the informers, and its age. Everything else a decision reads (the VPA's own object, the
  namespace's LimitRanges, HPAs with ``--avoid-hpa-conflict``, the largest node with
  ``--cap-to-largest-node``) is covered by the informers' event handlers: they run in the same
  step as the informer's update (:meth:`AdmissionCaches.on_input_change`), before any later
  request is read, and drop every answer made with the VPA or in the namespace (all of them for
  a node change).
- **The same side effects.** Only answers whose decision had no events to record (no HPA
  conflict, no LimitRange override) and nothing missing (no ``not_matched``) are remembered; a
  hit counts the pod as the decision would (``vpa_admission_controller_admission_pods``) and
  its latency is observed by the route.

Bounded: at most 1,024 answers, bodies up to 32 KiB, 8 MiB of keys and answers in all (the
count alone allowed about 33 MiB: issue 27, item 14), an hour each
(:class:`~kubescale.controllers.vpa.admission.decision_cache.InvalidatedLru`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final

from kubescale.controllers.vpa.admission.decision_cache import InvalidatedLru
from kubescale.controllers.vpa.admission.match_cache import Match
from kubescale.webhook.admission_reviews import parse_review

__all__ = ["MAX_ANSWERS", "MAX_BODY_BYTES", "MAX_BYTES", "AnswerCache", "CachedAnswer", "split_uid"]

MAX_ANSWERS: Final = 1024
MAX_BODY_BYTES: Final = 32 * 1024
MAX_BYTES: Final = 8 * 1024 * 1024
"""The answers' summed cost: key, answer bytes and :data:`ENTRY_OVERHEAD` each."""
ENTRY_OVERHEAD: Final = 512
_UID_FIELD: Final = b'"uid":'
_JSON_SPACE: Final = b" \t\r\n"
_PLAIN_UID: Final = re.compile(rb"[ !#-\[\]-~]{1,256}")
"""Printable ASCII without ``"`` and ``\\``: the encoder writes it back as it is."""
_PROBE: Final = "kubescale-answer-cache-probe"


def split_uid(body: bytes) -> tuple[bytes, bytes] | None:
    """``(key, uid)``: ``body`` without the value of its first ``"uid":"`` field, and that
    value; ``None`` when there is none or it is not plain (see the module docstring)."""
    span = _uid_span(body)
    if span is None:
        return None
    value, end = span
    return body[:value] + body[end:], body[value:end]


def _uid_span(body: bytes) -> tuple[int, int] | None:
    """Where the value of the first ``"uid":`` field lies (inside its quotes), if plain."""
    start = body.find(_UID_FIELD)
    if start < 0:
        return None
    quote = start + len(_UID_FIELD)
    while body[quote : quote + 1] in _JSON_SPACE and quote < len(body):
        quote += 1
    if body[quote : quote + 1] != b'"':
        return None
    value = quote + 1
    end = body.find(b'"', value)
    if end < 0 or not _PLAIN_UID.fullmatch(body, value, end):
        return None
    return value, end


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A pod's answer around its uid, and what it was made with."""

    head: bytes
    """The answer up to and including the uid's opening quote."""
    tail: bytes
    """The answer from the uid's closing quote."""
    patches: tuple[dict[str, Any], ...]
    match_key: Hashable
    match: Match

    @property
    def applied(self) -> bool:
        return bool(self.patches)

    @property
    def status(self) -> str:
        """The latency metric's status, as for a decided pod."""
        return "applied" if self.patches else "skipped"

    def body(self, uid: bytes) -> bytes:
        return self.head + uid + self.tail


class AnswerCache(InvalidatedLru[CachedAnswer]):
    """Answers by :func:`split_uid` key (module docstring); an input listener of the
    admission caches."""

    def __init__(self) -> None:
        super().__init__(max_entries=MAX_ANSWERS, max_bytes=MAX_BYTES)

    def remember(
        self,
        body: bytes,
        *,
        uid: str,
        answer: tuple[bytes, bytes],
        patches: tuple[dict[str, Any], ...],
        match: tuple[Hashable, Match],
        namespace: str,
    ) -> None:
        """Remember the answer to ``body`` (``answer``: its bytes before and after the uid's
        JSON string), when its first uid field is ``request.uid`` (module docstring)."""
        if len(body) > MAX_BODY_BYTES or self.max_entries <= 0:
            return
        span = _uid_span(body)
        if span is None:
            return
        value, end = span
        if body[value:end] != uid.encode():
            return
        probe = parse_review(body[:value] + _PROBE.encode() + body[end:])
        if probe.uid != _PROBE:
            return
        key = body[:value] + body[end:]
        head, tail = answer[0] + b'"', b'"' + answer[1]
        match_key, entry = match
        vpa_metadata = (entry.vpa or {}).get("metadata")
        vpa_uid = vpa_metadata.get("uid") if isinstance(vpa_metadata, dict) else None
        self.put(
            key,
            CachedAnswer(
                head=head,
                tail=tail,
                patches=patches,
                match_key=match_key,
                match=entry,
            ),
            vpa_uid=str(vpa_uid or ""),
            namespace=namespace,
            cost=ENTRY_OVERHEAD + len(key) + len(head) + len(tail),
        )
