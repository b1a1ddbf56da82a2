"""A kubeconfig whose cluster ``server`` has no scheme (``server: 127.0.0.1:6443``, fresh-user
trial 5, issue 35) is read as client-go reads it (``rest.DefaultServerURL``, via
``defaultServerUrlFor``): ``https://`` when the kubeconfig gives a CA, a client certificate or
``insecure-skip-tls-verify``, else ``http://``; one with a path (``127.0.0.1:6443/k8s``) is refused
in one line naming the kubeconfig file and the field. karpy used the text as the URL: every
request failed with ``cannot reach the Kubernetes API server at 127.0.0.1:6443: 127.0.0.1:6443/version``.
Servers on 127.0.0.1 only."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from karpy_core.errors import KubeconfigError
from karpy_core.kube.client import AsyncKubeClient, kubernetes_api_client
from karpy_core.kube.transport import load_kubeconfig

PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot parsed here\n-----END CERTIFICATE-----\n").decode()


def _kubeconfig(path: Path, server: str, cluster: dict[str, Any] | None = None, user: dict[str, Any] | None = None) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dev",
        "clusters": [{"name": "dev", "cluster": {"server": server, **(cluster or {})}}],
        "contexts": [{"name": "dev", "context": {"cluster": "dev", "user": "dev"}}],
        "users": [{"name": "dev", "user": user or {"token": "t0ken"}}],
    }))
    return path


@pytest.mark.parametrize(("cluster", "user", "scheme"), [
    ({}, {"token": "t"}, "http"),
    ({"certificate-authority-data": PEM}, {"token": "t"}, "https"),
    ({"certificate-authority": "ca.crt"}, {"token": "t"}, "https"),
    ({"insecure-skip-tls-verify": True}, {"token": "t"}, "https"),
    ({}, {"client-certificate": "me.crt", "client-key": "me.key"}, "https"),
    ({}, {"client-certificate-data": PEM, "client-key-data": PEM}, "https"),
], ids=["nothing", "ca-data", "ca-file", "insecure", "cert-file", "cert-data"])
@pytest.mark.parametrize("server", ["127.0.0.1:6443", "localhost:6443", "127.0.0.1", "127.0.0.1:6443/"])
async def test_a_server_without_scheme_gets_client_gos_default(tmp_path: Path, server: str, cluster: dict[str, Any],
                                                               user: dict[str, Any], scheme: str) -> None:
    access = await load_kubeconfig(str(_kubeconfig(tmp_path / "kc", server, cluster, user)))
    assert access.server == f"{scheme}://{server}"


@pytest.mark.parametrize("server", ["https://127.0.0.1:6443", "http://127.0.0.1:8080", "https://api.example.com/prefix"])
async def test_a_server_with_a_scheme_is_taken_as_written(tmp_path: Path, server: str) -> None:
    assert (await load_kubeconfig(str(_kubeconfig(tmp_path / "kc", server)))).server == server


@pytest.mark.parametrize("server", ["127.0.0.1:6443/k8s", "localhost:6443/api/v1"])
async def test_a_server_without_scheme_with_a_path_is_refused(tmp_path: Path, server: str) -> None:
    with pytest.raises(KubeconfigError) as info:
        await load_kubeconfig(str(_kubeconfig(tmp_path / "kc", server)))
    assert str(info.value) == (f"Invalid kube-config file. clusters[dev].cluster.server {server!r} "
                               "must be a URL (https://host:port) or a host:port pair")


@pytest.fixture
async def apiserver() -> AsyncIterator[tuple[int, list[str]]]:
    """A plain-HTTP server on 127.0.0.1 answering ``/version``: (port, Authorization headers seen)."""
    seen: list[str] = []

    async def version(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"major": "1", "minor": "33", "gitVersion": "v1.33.0", "gitCommit": "0", "gitTreeState": "clean",
                                  "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
                                  "platform": "linux/amd64"})

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)  # kubernetes-asyncio's VersionApi
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield runner.addresses[0][1], seen
    await runner.cleanup()


async def test_the_client_reaches_a_plain_http_server_written_without_scheme(
        tmp_path: Path, apiserver: tuple[int, list[str]]) -> None:
    port, seen = apiserver
    kube = await AsyncKubeClient.from_config(str(_kubeconfig(tmp_path / "kc", f"127.0.0.1:{port}")))
    try:
        await kube.probe()
    finally:
        await kube.close()
    assert seen == ["Bearer t0ken"]


def _karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from karpy_core.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_cli_names_the_file_and_field_of_a_server_it_cannot_read(tmp_path: Path) -> None:
    config = _kubeconfig(tmp_path / "kc", "127.0.0.1:6443/k8s")
    result = _karpy("simulate", "--from-cluster", "--kubeconfig", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"error: cannot use {config}: Invalid kube-config file. clusters[dev].cluster.server '127.0.0.1:6443/k8s' "
        "must be a URL (https://host:port) or a host:port pair"]


def test_the_cli_reports_the_url_it_tried_for_a_server_without_scheme(tmp_path: Path) -> None:
    """Nothing listens on port 1: the usual unreachable line (exit 1), with the URL client-go would
    have used, not the text of the field."""
    result = _karpy("simulate", "--from-cluster", "--kubeconfig", str(_kubeconfig(tmp_path / "kc", "127.0.0.1:1")))
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach the Kubernetes API server at http://127.0.0.1:1: "), result.stderr
    assert len(result.stderr.splitlines()) == 1


EXEC_USER = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "interactiveMode": "Never",
                      "args": ["-c", 'print(\'{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", '
                                     '"status": {"token": "from-exec"}}\')']}}


@pytest.mark.parametrize(("cluster", "scheme"), [({}, "http"), ({"certificate-authority-data": PEM}, "https")])
async def test_an_exec_user_gets_the_same_default(tmp_path: Path, cluster: dict[str, Any], scheme: str) -> None:
    """Users with an exec plugin are loaded through kubernetes-asyncio, which takes the server as
    written and reads the CA only for https://: the default scheme and the CA are karpy's."""
    access = await load_kubeconfig(str(_kubeconfig(tmp_path / "kc", "127.0.0.1:6443", cluster, EXEC_USER)))
    assert access.server == f"{scheme}://127.0.0.1:6443"
    assert access.ca_pem() == (base64.b64decode(PEM).decode() if cluster else None)
    assert await access.auth.header() == "Bearer from-exec"


async def test_install_crds_client_reaches_the_same_server(tmp_path: Path, apiserver: tuple[int, list[str]]) -> None:
    """``karpy install-crds`` builds kubernetes-asyncio's generated client, which took the server as
    written: it reaches the plain-HTTP server as every other command does."""
    from kubernetes_asyncio import client as k8s_client

    port, seen = apiserver
    api = await kubernetes_api_client(str(_kubeconfig(tmp_path / "kc", f"127.0.0.1:{port}/")))
    try:
        assert api.configuration.host == f"http://127.0.0.1:{port}"
        info = await k8s_client.VersionApi(api).get_code()
    finally:
        await api.close()
    assert info.git_version == "v1.33.0"
    assert seen == ["Bearer t0ken"]


async def test_install_crds_client_keeps_the_ca_of_a_server_without_scheme(tmp_path: Path) -> None:
    """With a CA the server is https:// (client-go's default) and the CA, which kubernetes-asyncio
    reads only for https://, is used: the client's TLS context trusts it (a real CA, made here)."""
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "karpy-test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256()))
    pem = cert.public_bytes(serialization.Encoding.PEM)
    config = _kubeconfig(tmp_path / "kc", "127.0.0.1:6443", {"certificate-authority-data": base64.b64encode(pem).decode()})
    api = await kubernetes_api_client(str(config))
    try:
        assert api.configuration.host == "https://127.0.0.1:6443"
        context = api.rest_client.pool_manager.connector._ssl
        assert isinstance(context, ssl.SSLContext)
        assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "karpy-test-ca"),),)]
    finally:
        await api.close()
    assert list(tmp_path.glob("karpy-kubeconfig-*")) == []
