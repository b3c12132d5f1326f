"""A pod's answer spliced from the per-patch template is, byte for byte, the review the route
would encode (any uid: non-ASCII, quotes, control characters, lone surrogates that orjson
refuses and the standard library escapes)."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubescale.webhook.admission_reviews import encode_json, review_response
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

PATCHES = st.one_of(
    st.just(""),
    st.binary(min_size=1, max_size=40).map(lambda raw: base64.b64encode(raw).decode("ascii")),
)


@given(uids=st.lists(st.text(max_size=12), min_size=1, max_size=4), patch=PATCHES)
def test_the_spliced_answer_is_the_encoded_review(uids: list[str], patch: str) -> None:
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    for uid in uids:  # the first builds the template, the others reuse it
        expected = encode_json(review_response(uid=uid, encoded_patch=patch))
        assert webhook._pod_body(uid, patch) == expected


def test_a_lone_surrogate_uid_is_written_as_the_standard_library_writes_it() -> None:
    webhook = AdmissionWebhook(settings=WebhookSettings(), registry=CollectorRegistry())
    body = webhook._pod_body("a\ud800é", "cGF0Y2g=")
    assert b'"uid":"a\\ud800\\u00e9"' in body
    assert body == encode_json(review_response(uid="a\ud800é", encoded_patch="cGF0Y2g="))
