"""KakaoCloud credentials and the ownership-signing keyring: loading, validation, redaction.

Sources (seed 004, "Step 1. Secret 생성", and the Helm chart):

* **Credentials** - the ``kakaocloud-credentials`` Secret with keys ``applicationCredentialId``,
  ``applicationCredentialSecret`` and ``region``; or the environment variables
  ``KAKAOCLOUD_APPLICATION_CREDENTIAL_ID``, ``KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET``,
  ``KAKAOCLOUD_REGION`` and ``KAKAOCLOUD_PROJECT_ID`` (what the chart passes).
* **Keyring** - the ``karpenter-sigkey`` Secret's ``keyring.json`` data key, mounted by the chart
  at ``/etc/karpy/keyring/keyring.json`` (env ``KAKAOCLOUD_KEYRING_FILE`` overrides the path)::

      {"activeKeyID": "k1", "keys": [{"id": "k1", "key": "<base64 of 32 random bytes>"}]}

Both are **read only**: karpy never writes, creates or rotates them. Rotation is the operator's
job: add a key, make it ``activeKeyID``, keep the old one while VMs signed with it exist.

Secret values live in :class:`Secret` wrappers whose ``repr``/``str`` never show the value, and no
error message built here includes one; every secret value and signing key is registered with
:mod:`karpy_core.redaction` as soon as it is loaded.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from karpy_core.errors import ConfigurationError, KubeAPIError
from karpy_core.redaction import register_secret

if TYPE_CHECKING:
    from karpy_core.kube.port import KubeClient

__all__ = [
    "DEFAULT_KEYRING_FILE",
    "DEFAULT_REGION",
    "ENV_CREDENTIAL_ID",
    "ENV_CREDENTIAL_SECRET",
    "ENV_KEYRING_FILE",
    "ENV_PROJECT_ID",
    "ENV_REGION",
    "KEY_BYTES",
    "MAX_KEY_ID_LENGTH",
    "Credentials",
    "Keyring",
    "Secret",
    "SigningKey",
    "credentials_from_env",
    "credentials_from_mapping",
    "credentials_from_secret",
    "keyring_from_file",
    "keyring_from_secret",
    "keyring_from_secret_data",
    "secret_data",
    "parse_keyring",
]

ENV_CREDENTIAL_ID = "KAKAOCLOUD_APPLICATION_CREDENTIAL_ID"
ENV_CREDENTIAL_SECRET = "KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET"
ENV_REGION = "KAKAOCLOUD_REGION"
ENV_PROJECT_ID = "KAKAOCLOUD_PROJECT_ID"
ENV_KEYRING_FILE = "KAKAOCLOUD_KEYRING_FILE"
DEFAULT_KEYRING_FILE = "/etc/karpy/keyring/keyring.json"
DEFAULT_REGION = "kr-central-2"
KEY_BYTES = 32
"""Every signing key is exactly 32 bytes (``head -c 32 /dev/urandom | base64`` in seed 004)."""
MAX_KEY_ID_LENGTH = 7
"""Seed 004: "activeKeyID는 최대 7자"; applied to every key id, since any may become active."""
_KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,7}\Z")


class Secret:
    """A string that never shows itself in ``repr``, ``str`` or f-strings; :meth:`reveal` returns it.
    The value is registered with :mod:`karpy_core.redaction`, so no log line shows it either."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value
        register_secret(value)

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)


@dataclass(frozen=True)
class Credentials:
    """An IAM application credential ("IAM 액세스 키").

    Attributes:
        credential_id: ``applicationCredentialId`` (not secret, but shown only in its first 4 characters).
        secret: ``applicationCredentialSecret``.
        region: ``kr-central-2`` (the only region the reference covers).
        project_id: KakaoCloud project id, optional (only used for reports).
    """

    credential_id: str
    secret: Secret = field(repr=False)
    region: str = DEFAULT_REGION
    project_id: str | None = None

    def __repr__(self) -> str:
        shown = self.credential_id[:4] + "…" if self.credential_id else ""
        return f"Credentials(credential_id={shown!r}, region={self.region!r}, project_id={self.project_id!r})"


@dataclass(frozen=True)
class SigningKey:
    """One keyring entry: ``id`` (1..7 characters) and 32 secret bytes (never shown; registered
    with :mod:`karpy_core.redaction`)."""

    id: str
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        register_secret(self.key)

    def __repr__(self) -> str:
        return f"SigningKey(id={self.id!r})"


@dataclass(frozen=True)
class Keyring:
    """The ownership-signing keyring. ``active`` signs new VMs; every key verifies.

    Raises (from :func:`parse_keyring`):
        ConfigurationError: malformed JSON, ``activeKeyID`` longer than 7 characters or missing
            from ``keys``, a key that is not base64 of exactly 32 bytes, or repeated ids.
    """

    active_key_id: str
    keys: tuple[SigningKey, ...]

    @property
    def active(self) -> SigningKey:
        return self.get(self.active_key_id)  # type: ignore[return-value]

    def get(self, key_id: str) -> SigningKey | None:
        for k in self.keys:
            if k.id == key_id:
                return k
        return None

    def __repr__(self) -> str:
        return f"Keyring(active_key_id={self.active_key_id!r}, key_ids={[k.id for k in self.keys]!r})"


# --------------------------------------------------------------------------------------------
# Credentials
# --------------------------------------------------------------------------------------------


def credentials_from_mapping(data: Mapping[str, str], *, where: str, project_id: str | None = None) -> Credentials:
    """Credentials from the seed-004 Secret keys (``applicationCredentialId``,
    ``applicationCredentialSecret``, optional ``region``), values already decoded.

    Raises:
        ConfigurationError: a key is missing or empty (the message names ``where`` and the key).
    """
    missing = [k for k in ("applicationCredentialId", "applicationCredentialSecret") if not (data.get(k) or "").strip()]
    if missing:
        raise ConfigurationError(f"KakaoCloud credentials in {where}: missing or empty key(s) {', '.join(missing)}")
    return Credentials(
        credential_id=data["applicationCredentialId"].strip(),
        secret=Secret(data["applicationCredentialSecret"].strip()),
        region=(data.get("region") or DEFAULT_REGION).strip(),
        project_id=project_id,
    )


def credentials_from_env(env: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials from the chart's environment variables, or None when the id variable is unset.

    Raises:
        ConfigurationError: the id is set but the secret is not.
    """
    env = os.environ if env is None else env
    if not env.get(ENV_CREDENTIAL_ID):
        return None
    if not env.get(ENV_CREDENTIAL_SECRET):
        raise ConfigurationError(f"{ENV_CREDENTIAL_ID} is set but {ENV_CREDENTIAL_SECRET} is not")
    return Credentials(
        credential_id=env[ENV_CREDENTIAL_ID].strip(),
        secret=Secret(env[ENV_CREDENTIAL_SECRET].strip()),
        region=(env.get(ENV_REGION) or DEFAULT_REGION).strip(),
        project_id=env.get(ENV_PROJECT_ID) or None,
    )


async def _secret_data(kube: KubeClient, namespace: str, name: str) -> dict[str, str]:
    try:
        obj = await kube.get("Secret", name, namespace)
    except KubeAPIError as exc:
        raise ConfigurationError(f"cannot read Secret {namespace}/{name}: {exc.status} {exc.reason}") from None
    return secret_data(obj, namespace, name)


def secret_data(obj: Mapping[str, Any], namespace: str, name: str) -> dict[str, str]:
    """The decoded ``data`` (over ``stringData``) of the Secret ``obj`` (``namespace/name``, as read).

    Raises:
        ConfigurationError: a ``data`` value is not base64 UTF-8 text (naming the Secret and the key).
    """
    out: dict[str, str] = {}
    for k, v in (obj.get("data") or {}).items():
        try:
            out[k] = base64.b64decode(v, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise ConfigurationError(f"Secret {namespace}/{name}: data key {k} is not base64 UTF-8 text") from None
    for k, v in (obj.get("stringData") or {}).items():
        out.setdefault(k, v)
    return out


async def credentials_from_secret(
    kube: KubeClient, *, namespace: str, name: str = "kakaocloud-credentials", project_id: str | None = None
) -> Credentials:
    """Read the seed-004 credentials Secret through the KubeClient port (never written).

    Raises:
        ConfigurationError: the Secret cannot be read or lacks a key.
    """
    data = await _secret_data(kube, namespace, name)
    return credentials_from_mapping(data, where=f"Secret {namespace}/{name}", project_id=project_id)


# --------------------------------------------------------------------------------------------
# Keyring
# --------------------------------------------------------------------------------------------


def parse_keyring(text: str | bytes, *, where: str = "keyring.json") -> Keyring:
    """Parse and validate ``keyring.json`` (see the module docstring).

    Raises:
        ConfigurationError: naming ``where`` and the offending field, never a value that failed to
            parse (a key pasted into ``id`` or ``activeKeyID`` would be printed otherwise); only key
            ids that passed validation (1..7 id characters) are quoted.
    """
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{where}: not valid JSON ({type(exc).__name__} at {getattr(exc, 'pos', '?')})") from None
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{where}: must be a JSON object with activeKeyID and keys")
    active = doc.get("activeKeyID")
    raw_keys = doc.get("keys")
    if not isinstance(active, str) or not active:
        raise ConfigurationError(f"{where}: activeKeyID must be a non-empty string")
    if not _KEY_ID.match(active):  # the value is not shown: a key pasted here would be printed
        raise ConfigurationError(
            f"{where}: activeKeyID must be 1..{MAX_KEY_ID_LENGTH} characters of letters, digits, '.', '_' or '-' "
            f"(is it a key? the value is not shown)"
        )
    if not isinstance(raw_keys, list) or not raw_keys:
        raise ConfigurationError(f"{where}: keys must be a non-empty list of {{id, key}} objects")
    keys: list[SigningKey] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw_keys):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not isinstance(entry.get("key"), str):
            raise ConfigurationError(f"{where}: keys[{i}] must be an object with string fields id and key")
        kid = entry["id"]
        if not _KEY_ID.match(kid):  # never shown: with id and key swapped this is the key
            raise ConfigurationError(
                f"{where}: keys[{i}].id must be 1..{MAX_KEY_ID_LENGTH} characters of letters, digits, '.', '_' or '-' "
                f"(are id and key swapped? the value is not shown)"
            )
        if kid in seen:
            raise ConfigurationError(f"{where}: keys[{i}].id {kid!r} is repeated; key ids must be unique")
        seen.add(kid)
        try:
            key = base64.b64decode(entry["key"].strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ConfigurationError(f"{where}: keys[{i}] (id {kid!r}): key is not valid base64") from None
        if len(key) != KEY_BYTES:
            raise ConfigurationError(
                f"{where}: keys[{i}] (id {kid!r}): key must decode to exactly {KEY_BYTES} bytes, got {len(key)}"
            )
        keys.append(SigningKey(kid, key))
    if active not in seen:
        raise ConfigurationError(f"{where}: activeKeyID is not one of the key ids {sorted(seen)}")
    return Keyring(active, tuple(keys))


def keyring_from_file(path: str | os.PathLike[str]) -> Keyring:
    """Read ``keyring.json`` from a file (the chart's mount).

    Raises:
        ConfigurationError: unreadable or invalid.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the KakaoCloud keyring file {path}: {exc.strerror}") from None
    return parse_keyring(data, where=str(path))


async def keyring_from_secret(kube: KubeClient, *, namespace: str, name: str = "karpenter-sigkey") -> Keyring:
    """Read the keyring Secret's ``keyring.json`` through the KubeClient port (never written).

    Raises:
        ConfigurationError: unreadable Secret, missing ``keyring.json`` key, or invalid keyring.
    """
    return keyring_from_secret_data(await _secret_data(kube, namespace, name), namespace=namespace, name=name)


def keyring_from_secret_data(data: Mapping[str, str], *, namespace: str, name: str) -> Keyring:
    """The keyring in the decoded data of the Secret ``namespace/name`` (:func:`secret_data`).

    Raises:
        ConfigurationError: missing ``keyring.json`` key, or invalid keyring.
    """
    if "keyring.json" not in data:
        raise ConfigurationError(f"Secret {namespace}/{name}: the data key must be named keyring.json (seed 004)")
    return parse_keyring(data["keyring.json"], where=f"Secret {namespace}/{name} keyring.json")


