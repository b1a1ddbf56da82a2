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

Before the instance id exists, create sends a **pending** record whose last field is ``p``, a
launch nonce (8 base64url characters: the POST time in whole seconds since the epoch, 4 bytes,
and 2 random bytes) and a 24-character MAC over
``"karpy1p\\0<cluster identity>\\0<nonce>\\0<nodeclaim>\\0<key id>"``. karpy writes the nonce
on the NodeClaim (annotation :data:`NONCE_ANNOTATION`) *before* the POST and draws a new one for
every POST, so a pending record names exactly one POST. A record verifies only under a keyring
key; create adopts a pending VM only when its nonce is the NodeClaim's current one and the VM was
created within the launch window of the nonce's time (see ``unowned.py``): an older VM renamed
and given a copied record is refused by its ``created_at``. A record copied onto another VM is byte-identical
to the original, so when two VMs carry the same pending record karpy cannot tell which one it made
and touches neither (:data:`Ownership.PENDING` VMs are adopted, or garbage-collected like owned
ones, only when their record is unique).

Verification tries the key the record names; a record naming a key that is no longer in the
keyring, a MAC that does not verify, another cluster's tag or no record at all all mean
"not ours": such VMs are reported, never deleted.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from karpy_kakaocloud.credentials import Keyring

__all__ = [
    "DESCRIPTION_LIMIT",
    "DESCRIPTION_PATTERN",
    "MAX_NODECLAIM_NAME",
    "Ownership",
    "Verdict",
    "NONCE_ANNOTATION",
    "cluster_tag",
    "describe_owned",
    "describe_pending",
    "max_nodeclaim_name",
    "new_nonce",
    "nonce_time",
    "verify",
]

PREFIX = "karpy1"
DESCRIPTION_LIMIT = 100
"""BCS description limit, in characters (reference §2.6)."""
DESCRIPTION_PATTERN = re.compile(r"""^[a-zA-Z0-9ㄱ-ㅎ가-힣 .,!?()\[\]{}:;"'@#%&*+=_/\\|<>~-]*\Z""")
"""Characters BCS accepts in a description (reference §2.6, TF validator)."""
MAC_CHARS = 32
NONCE_CHARS = 8
PENDING_MAC_CHARS = MAC_CHARS - NONCE_CHARS
"""A pending record carries nonce + MAC in the 32 characters an owned record's MAC takes (the
MAC truncated to 24 base64url characters, 144 bits)."""
NONCE_ANNOTATION = "karpenter.kakaocloud.com/launch-nonce"
"""NodeClaim annotation holding the nonce of the latest create POST (written before the POST)."""
_NONCE = re.compile(r"[A-Za-z0-9_-]{8}")
TAG_CHARS = 6
MAX_NODECLAIM_NAME = 44
"""Longest NodeClaim name that fits with a 7-character key id (a 38-character NodePool name, ``-``
and 5 random characters)."""
_RECORD = re.compile(r"karpy1:([0-9a-f]{6}):([A-Za-z0-9._-]{1,7}):([a-z0-9.-]{1,63}):(p?)([A-Za-z0-9_-]{32})")
"""An ownership record, matched with :meth:`re.Pattern.fullmatch` only: the whole description,
nothing before or after it (``$`` would also accept a trailing newline, so a copied record plus
``"\\n"`` would verify as a different description and escape the duplicate count)."""


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
    nonce: str | None = None
    """The launch nonce of a pending record (None for owned records)."""

    @property
    def owned(self) -> bool:
        return self.ownership is Ownership.OWNED


def cluster_tag(cluster_identity: str) -> str:
    """6 hex characters identifying the cluster in descriptions (not a secret, not a proof)."""
    return hashlib.sha256(cluster_identity.encode()).hexdigest()[:TAG_CHARS]


def _mac(key: bytes, cluster_identity: str, instance_id: str, nodeclaim: str, key_id: str) -> str:
    msg = "\0".join((PREFIX, cluster_identity, instance_id, nodeclaim, key_id)).encode()
    return base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode().rstrip("=")[:MAC_CHARS]


def _pending_mac(key: bytes, cluster_identity: str, nonce: str, nodeclaim: str, key_id: str) -> str:
    msg = "\0".join((PREFIX + "p", cluster_identity, nonce, nodeclaim, key_id)).encode()
    return base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode().rstrip("=")[:PENDING_MAC_CHARS]


def new_nonce(now: float) -> str:
    """A fresh launch nonce for a POST at ``now`` (seconds since the epoch): 8 base64url
    characters encoding ``int(now)`` (4 bytes, big-endian) and 2 bytes from :func:`secrets.token_bytes`.
    Unique per NodeClaim and second, not secret (the MAC is what cannot be forged)."""
    return base64.urlsafe_b64encode(int(now).to_bytes(4, "big") + secrets.token_bytes(2)).decode()


def nonce_time(nonce: str) -> float | None:
    """The POST time (seconds since the epoch) a nonce from :func:`new_nonce` carries, or None."""
    if not _NONCE.fullmatch(nonce):
        return None
    try:
        return float(int.from_bytes(base64.urlsafe_b64decode(nonce)[:4], "big"))
    except (ValueError, binascii.Error):
        return None


def _record(keyring: Keyring, cluster_identity: str, instance_id: str, nodeclaim: str, nonce: str | None) -> str:
    key = keyring.active
    if len(nodeclaim) > max_nodeclaim_name(key.id):
        raise ValueError(
            f"NodeClaim name {nodeclaim!r} is {len(nodeclaim)} characters; at most {max_nodeclaim_name(key.id)} fit "
            f"in the {DESCRIPTION_LIMIT}-character instance description (keep NodePool names within 38 characters)"
        )
    if nonce is None:
        mac = _mac(key.key, cluster_identity, instance_id, nodeclaim, key.id)
    else:
        if not _NONCE.fullmatch(nonce):
            raise ValueError("a launch nonce is 8 base64url characters")
        mac = "p" + nonce + _pending_mac(key.key, cluster_identity, nonce, nodeclaim, key.id)
    text = f"{PREFIX}:{cluster_tag(cluster_identity)}:{key.id}:{nodeclaim}:{mac}"
    assert len(text) <= DESCRIPTION_LIMIT and DESCRIPTION_PATTERN.match(text)
    return text


def describe_owned(keyring: Keyring, cluster_identity: str, instance_id: str, nodeclaim: str) -> str:
    """The signed description for a created VM, with the keyring's active key.

    Raises:
        ValueError: the NodeClaim name is too long to fit.
    """
    return _record(keyring, cluster_identity, instance_id, nodeclaim, None)


def describe_pending(keyring: Keyring, cluster_identity: str, nodeclaim: str, nonce: str) -> str:
    """The description sent with create, before the instance id is known, bound to the launch
    ``nonce`` (see the module docstring).

    Raises:
        ValueError: the NodeClaim name is too long to fit, or ``nonce`` is not 8 base64url characters.
    """
    return _record(keyring, cluster_identity, "", nodeclaim, nonce)


def verify(description: str | None, keyring: Keyring, cluster_identity: str, instance_id: str) -> Verdict:
    """Classify a VM by its description (constant-time MAC comparison). A pending record's
    :attr:`Verdict.nonce` is returned for the caller to match against the NodeClaim's."""
    m = _RECORD.fullmatch(description or "")
    if m is None:
        return Verdict(Ownership.UNSIGNED)
    tag, kid, nodeclaim, pending, mac = m.groups()
    if not hmac.compare_digest(tag, cluster_tag(cluster_identity)):
        return Verdict(Ownership.FOREIGN_CLUSTER, nodeclaim, kid)
    key = keyring.get(kid)
    if key is None:
        return Verdict(Ownership.UNKNOWN_KEY, nodeclaim, kid)
    if pending:
        nonce, mac = mac[:NONCE_CHARS], mac[NONCE_CHARS:]
        expected = _pending_mac(key.key, cluster_identity, nonce, nodeclaim, kid)
        if not hmac.compare_digest(mac.encode(), expected.encode()):
            return Verdict(Ownership.TAMPERED, nodeclaim, kid)
        return Verdict(Ownership.PENDING, nodeclaim, kid, nonce)
    expected = _mac(key.key, cluster_identity, instance_id, nodeclaim, kid)
    if not hmac.compare_digest(mac.encode(), expected.encode()):
        return Verdict(Ownership.TAMPERED, nodeclaim, kid)
    return Verdict(Ownership.OWNED, nodeclaim, kid)
