"""Node bootstrap for ``bootstrap.mode: Kubeadm``: a bootstrap token, the CA hash, cloud-init.

KakaoCloud documents no API that joins a plain BCS VM to a Kubernetes Engine cluster (reference
§9 "Node bootstrap"), so karpy does what kubeadm does (marked [INF] in the reference):

1. **Bootstrap token** - a ``bootstrap.kubernetes.io/token`` Secret ``bootstrap-token-<id>`` in
   ``kube-system``, created through the KubeClient port, with ``expiration`` set
   ``bootstrap_token_ttl`` seconds ahead (1 h by default; the token controller removes it), usages
   ``authentication``/``signing`` and group ``system:bootstrappers:kubeadm:default-node-token``.
   One token per NodeClaim; never logged.
2. **CA hash** - ``sha256:<hex>`` of the cluster CA certificate's DER SubjectPublicKeyInfo (what
   ``--discovery-token-ca-cert-hash`` wants), from a PEM the provider is given (the service
   account's ``ca.crt`` by default).
3. **User data** - a base64 cloud-init shell script (at most 16 KB, reference §2.6) that reads the
   instance id from the metadata service (169.254.169.254, reachable per seed 004), sets the
   kubelet's ``--provider-id`` to ``kakaocloud:///<zone>/<instance id>``, its node labels and
   taints (karpy's ``karpenter.sh/unregistered`` plus the NodeClaim's taints and startup taints,
   e.g. Cilium's ``node.cilium.io/agent-not-ready``), and runs ``kubeadm join
   <control_plane_endpoint.host>:<port>``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import TAINT_UNREGISTERED
from karpy_core.cloudprovider.launch import ProviderID
from karpy_core.errors import ConfigurationError
from karpy_core.redaction import register_secret
from karpy_core.utils.clock import iso

if TYPE_CHECKING:
    from karpy_core.kube.port import KubeClient

__all__ = [
    "MAX_USER_DATA",
    "PROVIDER_ID_SCHEME",
    "BootstrapToken",
    "ca_cert_hash",
    "create_bootstrap_token",
    "parse_provider_id",
    "provider_id",
    "render_user_data",
]

PROVIDER_ID_SCHEME = "kakaocloud"
MAX_USER_DATA = 16 * 1024
"""BCS ``user_data`` limit (base64 text), bytes."""
_ZONE = re.compile(r"[a-z0-9-]+")
_INSTANCE_ID = re.compile(r"[A-Za-z0-9-]+")
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)
_KUBELET_LABEL_PREFIXES = ("kubernetes.io/", "k8s.io/", "karpenter.sh/")


def provider_id(zone: str, instance_id: str) -> str:
    """``kakaocloud:///<zone>/<instance-id>``: what the kubelet's ``--provider-id`` and the
    NodeClaim's ``status.providerID`` carry."""
    return str(ProviderID(PROVIDER_ID_SCHEME, zone, instance_id))


def parse_provider_id(pid: str) -> tuple[str, str] | None:
    """``(zone, instance id)`` of a karpy KakaoCloud provider ID, or None when it is not one."""
    parsed = ProviderID.parse(pid, PROVIDER_ID_SCHEME)
    if parsed is None or not _ZONE.fullmatch(parsed.zone) or not _INSTANCE_ID.fullmatch(parsed.instance_id):
        return None
    return parsed.zone, parsed.instance_id


# --------------------------------------------------------------------------------------------
# CA hash: a minimal DER walk (Certificate -> tbsCertificate -> subjectPublicKeyInfo)
# --------------------------------------------------------------------------------------------


def _der_item(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``."""
    tag = data[pos]
    length = data[pos + 1]
    start = pos + 2
    if length & 0x80:
        n = length & 0x7F
        if n == 0 or n > 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[start : start + n], "big")
        start += n
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER")
    return tag, start, end


def ca_cert_hash(pem: str) -> str:
    """``sha256:<hex>`` over the SubjectPublicKeyInfo of the first certificate in ``pem``.

    Raises:
        ConfigurationError: no certificate, or not a parsable X.509 certificate.
    """
    m = _PEM.search(pem or "")
    if m is None:
        raise ConfigurationError("the cluster CA is not a PEM certificate (no BEGIN CERTIFICATE block)")
    try:
        der = base64.b64decode("".join(m.group(1).split()))
        tag, start, _ = _der_item(der, 0)  # Certificate SEQUENCE
        if tag != 0x30:
            raise ValueError("not a SEQUENCE")
        tag, pos, tbs_end = _der_item(der, start)  # tbsCertificate SEQUENCE
        if tag != 0x30:
            raise ValueError("no tbsCertificate")
        fields: list[tuple[int, int]] = []
        while pos < tbs_end:
            t, _s, e = _der_item(der, pos)
            fields.append((pos, e))
            pos = e
            if t == 0xA0:  # explicit version, not counted
                fields.pop()
        # serial, signature, issuer, validity, subject, subjectPublicKeyInfo
        spki_start, spki_end = fields[5]
    except (ValueError, IndexError, base64.binascii.Error) as exc:  # type: ignore[attr-defined]
        raise ConfigurationError(f"the cluster CA certificate cannot be parsed: {exc}") from None
    return "sha256:" + hashlib.sha256(der[spki_start:spki_end]).hexdigest()


# --------------------------------------------------------------------------------------------
# Bootstrap token
# --------------------------------------------------------------------------------------------


class BootstrapToken:
    """A kubeadm bootstrap token ``<id>.<secret>`` (6 + 16 characters of ``[a-z0-9]``). ``repr``
    hides the secret part; the token and its secret are registered with :mod:`karpy_core.redaction`
    (so neither they nor user data carrying them show in a log line)."""

    __slots__ = ("_secret", "expires", "token_id")

    def __init__(self, token_id: str, secret: str, expires: float):
        self.token_id = token_id
        self._secret = secret
        self.expires = expires
        register_secret(secret)
        register_secret(self.reveal())

    def reveal(self) -> str:
        return f"{self.token_id}.{self._secret}"

    def __repr__(self) -> str:
        return f"BootstrapToken(id={self.token_id!r}, expires={iso(self.expires)})"


def _token_chars(n: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(n))


async def create_bootstrap_token(kube: KubeClient, *, now: float, ttl: float, description: str) -> BootstrapToken:
    """Create a bootstrap-token Secret in ``kube-system`` (see the module docstring).

    Raises:
        karpy_core.errors.KubeAPIError: the API refused the Secret.
    """
    token = BootstrapToken(_token_chars(6), _token_chars(16), now + ttl)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "bootstrap.kubernetes.io/token",
        "metadata": {
            "name": f"bootstrap-token-{token.token_id}",
            "namespace": "kube-system",
            "labels": {"app.kubernetes.io/managed-by": "karpy"},
        },
        "stringData": {
            "description": description[:200],
            "token-id": token.token_id,
            "token-secret": token.reveal().split(".", 1)[1],
            "expiration": iso(token.expires),
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
        },
    }
    await kube.create("Secret", secret)
    return token


# --------------------------------------------------------------------------------------------
# User data
# --------------------------------------------------------------------------------------------


def kubelet_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels a kubelet may set on itself (no ``kubernetes.io``/``k8s.io``/``karpenter.sh``
    keys except ``node.kubernetes.io/``; karpy's registration copies the rest)."""
    out = {}
    for k, v in sorted(labels.items()):
        domain = k.split("/", 1)[0] + "/" if "/" in k else ""
        if domain and any(domain.endswith(p) for p in _KUBELET_LABEL_PREFIXES) and not k.startswith("node.kubernetes.io/"):
            continue
        out[k] = v
    return out


def _taint_arg(t: Mapping[str, Any]) -> str:
    value = t.get("value")
    return f"{t['key']}={value}:{t['effect']}" if value else f"{t['key']}:{t['effect']}"


def render_user_data(
    *,
    endpoint: str,
    token: BootstrapToken,
    ca_hash: str,
    zone: str,
    node_name: str,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, Any]] = (),
    startup_taints: Sequence[Mapping[str, Any]] = (),
    max_pods: int = 110,
) -> str:
    """The base64 cloud-init script (see the module docstring).

    Raises:
        ValueError: the result exceeds 16 KB.
    """
    all_taints = [{"key": TAINT_UNREGISTERED, "effect": "NoExecute"}, *taints, *startup_taints]
    label_arg = ",".join(f"{k}={v}" for k, v in kubelet_labels(labels).items())
    taint_arg = ",".join(_taint_arg(t) for t in all_taints)
    script = f"""#!/bin/bash
# karpy (KakaoCloud provider): join this VM to the cluster with kubeadm.
set -euo pipefail
META=http://169.254.169.254/openstack/latest/meta_data.json
for i in $(seq 1 60); do
  INSTANCE_ID=$(curl -fsS "$META" | python3 -c 'import json,sys; print(json.load(sys.stdin)["uuid"])') && break
  sleep 2
done
PROVIDER_ID="kakaocloud:///{zone}/${{INSTANCE_ID}}"
cat > /etc/default/kubelet <<KUBELET
KUBELET_EXTRA_ARGS=--provider-id=${{PROVIDER_ID}} --max-pods={max_pods} \\
  --node-labels={shlex.quote(label_arg)} --register-with-taints={shlex.quote(taint_arg)}
KUBELET
hostnamectl set-hostname {shlex.quote(node_name)} || true
kubeadm join {shlex.quote(endpoint)} \\
  --token {shlex.quote(token.reveal())} \\
  --discovery-token-ca-cert-hash {shlex.quote(ca_hash)} \\
  --node-name {shlex.quote(node_name)}
"""
    encoded = base64.b64encode(script.encode()).decode()
    if len(encoded) > MAX_USER_DATA:
        raise ValueError(f"user data is {len(encoded)} bytes of base64; BCS accepts at most {MAX_USER_DATA}")
    return encoded
