"""Signed ownership records in a BCS instance's ``description``.

karpy deletes a VM only when it can prove that this cluster launched it for a given NodeClaim.
After create it writes (``PUT /api/v1/instances/{id}``) a description of the form::

    karpy1:<cluster tag>:<key id>:<nodeclaim name>:<mac>

* ``cluster tag`` - 6 hex characters of SHA-256 over the cluster identity (classification only:
  "another cluster's VM" versus "tampered"; the MAC is what proves anything);
* ``key id`` - the keyring entry that signed (1..7 characters);
* ``mac`` - the first 32 characters (192 bits) of unpadded base64url HMAC-SHA256 under that key
  over ``"karpy1\\0<cluster identity>\\0<instance id>\\0<nodeclaim>\\0<key id>"``.

At most 6+1+6+1+7+1+44+1+1+32 = 100 characters (pending records add the ``p``) with NodeClaim
names up to 44 characters (NodePool names up to 38 plus ``-`` and 5 random characters) and only characters the API accepts
(reference §2.6: letters, digits, ``:``, ``-``, ``_``, ``.``).

Before the instance id exists, create sends a **pending** record whose MAC (prefixed ``p``)
covers everything but the instance id; it lets a retried create adopt a VM whose first attempt
answered 5xx or crashed before signing. Pending VMs are never deleted.

Verification tries the key the record names; a record naming a key that is no longer in the
keyring, a MAC that does not verify, another cluster's tag or no record at all all mean
"not ours": such VMs are reported, never deleted.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import re
from dataclasses import dataclass

from karpy_kakaocloud.credentials import Keyring

__all__ = [
    "DESCRIPTION_LIMIT",
    "DESCRIPTION_PATTERN",
    "MAX_NODECLAIM_NAME",
    "Ownership",
    "Verdict",
    "cluster_tag",
    "describe_owned",
    "describe_pending",
    "max_nodeclaim_name",
    "verify",
]

PREFIX = "karpy1"
DESCRIPTION_LIMIT = 100
"""BCS description limit, in characters (reference §2.6)."""
DESCRIPTION_PATTERN = re.compile(r"""^[a-zA-Z0-9ㄱ-ㅎ가-힣 .,!?()\[\]{}:;"'@#%&*+=_/\\|<>~-]*$""")
"""Characters BCS accepts in a description (reference §2.6, TF validator)."""
MAC_CHARS = 32
TAG_CHARS = 6
MAX_NODECLAIM_NAME = 44
"""Longest NodeClaim name that fits with a 7-character key id (a 38-character NodePool name, ``-``
and 5 random characters)."""
_RECORD = re.compile(r"^karpy1:([0-9a-f]{6}):([A-Za-z0-9._-]{1,7}):([a-z0-9.-]{1,63}):(p?)([A-Za-z0-9_-]{32})$")


def max_nodeclaim_name(key_id: str) -> int:
    """Longest NodeClaim name a record signed with ``key_id`` can carry."""
    return DESCRIPTION_LIMIT - (len(PREFIX) + 1 + TAG_CHARS + 1 + len(key_id) + 1 + 1 + 1 + MAC_CHARS)


class Ownership(enum.Enum):
    """What a description says about a VM."""

    OWNED = "owned"
    PENDING = "pending"
    UNSIGNED = "unsigned"
    TAMPERED = "tampered"
    FOREIGN_CLUSTER = "foreign-cluster"
    UNKNOWN_KEY = "unknown-key"


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`verify`: ``ownership``, the NodeClaim and key the record names."""

    ownership: Ownership
    nodeclaim: str | None = None
    key_id: str | None = None

    @property
    def owned(self) -> bool:
        return self.ownership is Ownership.OWNED


def cluster_tag(cluster_identity: str) -> str:
    """6 hex characters identifying the cluster in descriptions (not a secret, not a proof)."""
    return hashlib.sha256(cluster_identity.encode()).hexdigest()[:TAG_CHARS]


def _mac(key: bytes, cluster_identity: str, instance_id: str, nodeclaim: str, key_id: str) -> str:
    msg = "\0".join((PREFIX, cluster_identity, instance_id, nodeclaim, key_id)).encode()
    return base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode().rstrip("=")[:MAC_CHARS]


def _record(keyring: Keyring, cluster_identity: str, instance_id: str, nodeclaim: str, pending: bool) -> str:
    key = keyring.active
    if len(nodeclaim) > max_nodeclaim_name(key.id):
        raise ValueError(
            f"NodeClaim name {nodeclaim!r} is {len(nodeclaim)} characters; at most {max_nodeclaim_name(key.id)} fit "
            f"in the {DESCRIPTION_LIMIT}-character instance description (keep NodePool names within 38 characters)"
        )
    mac = _mac(key.key, cluster_identity, instance_id, nodeclaim, key.id)
    if pending:
        mac = "p" + mac
    text = f"{PREFIX}:{cluster_tag(cluster_identity)}:{key.id}:{nodeclaim}:{mac}"
    assert len(text) <= DESCRIPTION_LIMIT and DESCRIPTION_PATTERN.match(text)
    return text


def describe_owned(keyring: Keyring, cluster_identity: str, instance_id: str, nodeclaim: str) -> str:
    """The signed description for a created VM, with the keyring's active key.

    Raises:
        ValueError: the NodeClaim name is too long to fit.
    """
    return _record(keyring, cluster_identity, instance_id, nodeclaim, pending=False)


def describe_pending(keyring: Keyring, cluster_identity: str, nodeclaim: str) -> str:
    """The description sent with create, before the instance id is known (see the module docstring)."""
    return _record(keyring, cluster_identity, "", nodeclaim, pending=True)


def verify(description: str | None, keyring: Keyring, cluster_identity: str, instance_id: str) -> Verdict:
    """Classify a VM by its description (constant-time MAC comparison)."""
    m = _RECORD.match(description or "")
    if m is None:
        return Verdict(Ownership.UNSIGNED)
    tag, kid, nodeclaim, pending, mac = m.groups()
    if not hmac.compare_digest(tag, cluster_tag(cluster_identity)):
        return Verdict(Ownership.FOREIGN_CLUSTER, nodeclaim, kid)
    key = keyring.get(kid)
    if key is None:
        return Verdict(Ownership.UNKNOWN_KEY, nodeclaim, kid)
    expected = _mac(key.key, cluster_identity, "" if pending else instance_id, nodeclaim, kid)
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return Verdict(Ownership.TAMPERED, nodeclaim, kid)
    return Verdict(Ownership.PENDING if pending else Ownership.OWNED, nodeclaim, kid)
