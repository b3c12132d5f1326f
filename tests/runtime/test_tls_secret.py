"""Self-managed certificates (``--tls-secret-name``): one Secret, the one source of truth.

Against the in-process API server through the real client: two replicas racing at start end
with one Secret and the same certificate on both; rotation (serving certificate, then CA) is
driven by a virtual clock; a write whose answer is lost is not repeated blindly. The decision
(:func:`plan`) is checked by a table whose instants are worked out from the 2/3 rule.
"""

from __future__ import annotations

import asyncio
import base64
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubescale.base.clock import VirtualClock
from kubescale.certs.authority import service_dns_names
from kubescale.kube.backoff import BackoffPolicy
from kubescale.kube.client import ClientSettings, KubeClient, connect
from kubescale.kube.resources import SECRETS
from kubescale.runtime.tls_secret import (
    Action,
    SecretContent,
    SelfManagedTLS,
    generate,
    plan,
)
from kubescale.sim.apiserver.server import ApiServer

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACE = "kube-system"
SECRET = "vpa-tls-certs"
NAMES = service_dns_names("vpa-webhook", NAMESPACE)
FAST = ClientSettings(
    request_timeout=5.0,
    connect_timeout=2.0,
    max_attempts=3,
    retry_backoff=BackoffPolicy(initial=0.002, cap=0.02, jitter=0.5),
)

# Validity starts 5 minutes before issuance (clock-skew allowance). Serving: 365 d + 5 min of
# lifetime, due 2/3 through: 243 d 8 h 3 min 20 s after T0 - 5 min = T0 + 243 d 7 h 58 min 20 s.
SERVING_DUE = T0 + timedelta(days=243, hours=7, minutes=58, seconds=20)
# CA: 3650 d + 5 min, 2/3 = 2433 d 8 h 3 min 20 s, so due at T0 + 2433 d 7 h 58 min 20 s.
CA_DUE = T0 + timedelta(days=2433, hours=7, minutes=58, seconds=20)


@pytest.fixture(scope="module")
def issued_at_t0() -> SecretContent:
    return generate(Action.CREATE, None, names=NAMES, now=T0)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (T0, Action.USE),
        (SERVING_DUE - timedelta(seconds=1), Action.USE),
        (SERVING_DUE, Action.RENEW_SERVING),
        (T0 + timedelta(days=300), Action.RENEW_SERVING),
        (CA_DUE - timedelta(seconds=1), Action.RENEW_SERVING),
        # the CA's renewal takes precedence: it re-issues the serving certificate too
        (CA_DUE, Action.RENEW_CA),
    ],
)
def test_plan_renews_two_thirds_through_each_lifetime(
    issued_at_t0: SecretContent, now: datetime, expected: Action
) -> None:
    assert plan(issued_at_t0, now) is expected


def test_plan_creates_when_missing_and_replaces_what_does_not_fit(
    issued_at_t0: SecretContent,
) -> None:
    assert plan(None, T0) is Action.CREATE
    other = generate(Action.CREATE, None, names=NAMES, now=T0)
    # a serving certificate of another CA, a key of another certificate, a non-PEM blob
    mixed = SecretContent(
        issued_at_t0.ca_cert, issued_at_t0.ca_key, other.server_cert, other.server_key
    )
    wrong_key = SecretContent(
        issued_at_t0.ca_cert, issued_at_t0.ca_key, issued_at_t0.server_cert, other.server_key
    )
    garbage = SecretContent(b"x", b"y", b"z", b"w")
    for broken in (mixed, wrong_key, garbage):
        assert plan(broken, T0) is Action.REPLACE


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# mostly around the serving certificate's and the CA's renewal points, where a wrong rule shows
@given(
    days=st.floats(min_value=0, max_value=400)
    | st.floats(min_value=2300, max_value=2600)
    | st.floats(min_value=0, max_value=3649)
)
def test_whatever_is_due_one_step_makes_the_secret_usable_for_a_third_of_a_lifetime(
    issued_at_t0: SecretContent, days: float
) -> None:
    # Invariant: after the planned action the content is USE at that instant, the serving
    # certificate is valid for at least a third of its 365 days (121 d 16 h) from then, and
    # the served chain verifies against the first CA of the bundle.
    now = T0 + timedelta(days=days)
    action = plan(issued_at_t0, now)
    after = (
        issued_at_t0
        if action is Action.USE
        else generate(action, issued_at_t0, names=NAMES, now=now)
    )
    assert plan(after, now) is Action.USE
    leaf = x509.load_pem_x509_certificate(after.server_cert)
    assert leaf.not_valid_after_utc - now >= timedelta(days=365) / 3
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificates(after.ca_cert)[0])


# ---- against the in-process API server -------------------------------------------------------


@pytest.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


class Replica:
    def __init__(self, client: KubeClient, clock: VirtualClock, directory: Path) -> None:
        self.client = client
        self.directory = directory
        self.tls = SelfManagedTLS(
            client=client,
            clock=clock,
            namespace=NAMESPACE,
            name=SECRET,
            names=NAMES,
            cert_file=directory / "serverCert.pem",
            key_file=directory / "serverKey.pem",
            ca_file=directory / "caCert.pem",
        )

    def files(self) -> tuple[bytes, bytes, bytes]:
        return tuple(  # type: ignore[return-value]
            (self.directory / name).read_bytes()
            for name in ("caCert.pem", "serverCert.pem", "serverKey.pem")
        )


@pytest.fixture
async def replicas(
    apiserver: ApiServer, clock: VirtualClock, tmp_path: Path
) -> AsyncIterator[tuple[Replica, Replica]]:
    kubeconfig = tmp_path / "kubeconfig"
    apiserver.write_kubeconfig(kubeconfig)
    clients = [
        await connect(kubeconfig=kubeconfig, settings=FAST, rng=random.Random(seed))
        for seed in (1, 2)
    ]
    try:
        yield (
            Replica(clients[0], clock, tmp_path / "a"),
            Replica(clients[1], clock, tmp_path / "b"),
        )
    finally:
        for client in clients:
            await client.close()


async def _secret(client: KubeClient) -> SecretContent:
    return SecretContent.from_secret(await client.get(SECRETS, SECRET, namespace=NAMESPACE))


def _serial(pem: bytes) -> int:
    return x509.load_pem_x509_certificate(pem).serial_number


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0.001)  # the request log has no event to wait on
    raise AssertionError("condition never met")


async def test_two_replicas_racing_at_start_make_one_secret_and_serve_the_same_certificate(
    apiserver: ApiServer, replicas: tuple[Replica, Replica]
) -> None:
    a, b = replicas
    # Both reads are held until both have been received: both see no Secret, both generate and
    # both create; the loser's create gets 409 AlreadyExists and it serves the winner's.
    apiserver.faults.add(verb="get", resource="secrets", status=0, hang=True, count=2)
    syncs = asyncio.gather(a.tls.sync(), b.tls.sync())
    await _until(lambda: apiserver.requests.count(verb="get", resource="secrets") == 2)
    apiserver.faults.release()
    first, second = await syncs

    assert apiserver.requests.count(verb="create", resource="secrets") == 2
    listed = await a.client.list(SECRETS, namespace=NAMESPACE)
    assert [s["metadata"]["name"] for s in listed["items"]] == [SECRET]
    stored = await _secret(a.client)
    assert first == second == stored
    assert a.files() == b.files() == (stored.ca_cert, stored.server_cert, stored.server_key)
    leaf = x509.load_pem_x509_certificate(stored.server_cert)
    leaf.verify_directly_issued_by(x509.load_pem_x509_certificate(stored.ca_cert))
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == NAMES


async def test_rotation_before_expiry_keeps_both_replicas_and_the_ca_bundle_in_step(
    apiserver: ApiServer, replicas: tuple[Replica, Replica], clock: VirtualClock
) -> None:
    a, b = replicas
    await a.tls.sync()
    await b.tls.sync()
    issued = await _secret(a.client)
    assert a.files() == b.files()

    # Before the serving certificate is due nothing is written.
    await clock.advance((SERVING_DUE - T0).total_seconds() - 1)
    await asyncio.gather(a.tls.run_once(clock.now()), b.tls.run_once(clock.now()))
    assert await _secret(a.client) == issued
    assert apiserver.requests.count(verb="update", resource="secrets") == 0

    # Due: both replicas notice at once; one update wins, the other gets 409 Conflict and
    # reads the winner's. Same CA (the caBundle does not change), new serving certificate.
    await clock.advance(1)
    await asyncio.gather(a.tls.run_once(clock.now()), b.tls.run_once(clock.now()))
    renewed = await _secret(a.client)
    assert renewed.ca_cert == issued.ca_cert
    assert renewed.ca_key == issued.ca_key
    assert _serial(renewed.server_cert) != _serial(issued.server_cert)
    assert a.files() == b.files() == (renewed.ca_cert, renewed.server_cert, renewed.server_key)
    assert 1 <= apiserver.requests.count(verb="update", resource="secrets") <= 2

    # The CA due: a new CA signs a new serving certificate; the bundle is the new CA then the
    # old one (still valid), so a caller holding the old caBundle keeps verifying meanwhile.
    await clock.advance((CA_DUE - clock.now()).total_seconds())
    await a.tls.run_once(clock.now())
    await b.tls.run_once(clock.now())
    rotated = await _secret(b.client)
    cas = x509.load_pem_x509_certificates(rotated.ca_cert)
    assert len(cas) == 2
    assert cas[1] == x509.load_pem_x509_certificate(issued.ca_cert)
    assert cas[0] != cas[1]
    x509.load_pem_x509_certificate(rotated.server_cert).verify_directly_issued_by(cas[0])
    assert a.files() == b.files() == (rotated.ca_cert, rotated.server_cert, rotated.server_key)


async def test_a_create_whose_answer_is_lost_is_not_repeated_blindly(
    apiserver: ApiServer, replicas: tuple[Replica, Replica]
) -> None:
    a, _ = replicas
    # The create commits, then the answer is a 504: the replica reads the Secret and serves
    # what was committed rather than generating (and overwriting with) another certificate.
    apiserver.faults.add(
        verb="create", resource="secrets", status=504, after_commit=True, count=None
    )
    served = await a.tls.sync()
    stored = await _secret(a.client)
    assert served == stored
    assert a.files() == (stored.ca_cert, stored.server_cert, stored.server_key)
    assert apiserver.requests.count(verb="update", resource="secrets") == 0


async def test_an_unusable_secret_is_replaced(
    apiserver: ApiServer, replicas: tuple[Replica, Replica]
) -> None:
    a, _ = replicas
    await a.client.create(
        SECRETS,
        {
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "data": {"caCert.pem": base64.b64encode(b"not a certificate").decode()},
        },
    )
    served = await a.tls.sync()
    assert served == await _secret(a.client)
    assert plan(served, T0) is Action.USE
