"""The proxy environment is read once per client (``resolve_proxy_once``), as client-go's
``http.ProxyFromEnvironment`` would choose, and the session stops re-reading it per request."""

from __future__ import annotations

import pytest

from kubescale.kube.client import resolve_proxy_once
from kubescale.kube.connection import Configuration

PROXY = "http://proxy.example:3128"


@pytest.mark.parametrize(
    ("host", "proxies", "expected"),
    [
        # No proxy in the environment: none.
        ("https://10.0.0.1:443", {}, None),
        # HTTPS_PROXY set, NO_PROXY unset: the API server is reached through it.
        ("https://10.0.0.1:443", {"https": PROXY}, PROXY),
        # Only HTTP_PROXY: an https:// API server is not proxied (Go picks by the URL's scheme).
        ("https://10.0.0.1:443", {"http": PROXY}, None),
        # NO_PROXY names the IP exactly.
        ("https://10.0.0.1:443", {"https": PROXY, "no": "localhost,10.0.0.1"}, None),
        # NO_PROXY ".svc" covers api.cluster.svc (a domain suffix), not "mysvc".
        ("https://api.cluster.svc:443", {"https": PROXY, "no": ".svc"}, None),
        ("https://mysvc:443", {"https": PROXY, "no": ".svc"}, PROXY),
        # "svc" without the dot covers subdomains too (Go: matches the domain and below).
        ("https://api.cluster.svc:443", {"https": PROXY, "no": "svc"}, None),
        # "*" bypasses everything; a host:port entry matches the host.
        ("https://10.0.0.1:443", {"https": PROXY, "no": "*"}, None),
        ("https://kube.example:6443", {"https": PROXY, "no": "kube.example:6443"}, None),
    ],
)
def test_the_proxy_is_resolved_once(
    host: str, proxies: dict[str, str], expected: str | None
) -> None:
    configuration = Configuration(host=host)
    resolve_proxy_once(configuration, proxies=proxies)
    assert configuration.proxy == expected
    assert configuration.client_session_kwargs == {"trust_env": False}


def test_a_kubeconfig_proxy_wins() -> None:
    configuration = Configuration(host="https://10.0.0.1:443")
    configuration.proxy = "http://from-kubeconfig:8080"
    resolve_proxy_once(configuration, proxies={"https": PROXY})
    assert configuration.proxy == "http://from-kubeconfig:8080"
