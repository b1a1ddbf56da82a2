"""The NodePool template hash stored on NodeClaims (``karpenter.sh/nodepool-hash``) for drift.

Karpenter hashes ``spec.template`` with ``requirements`` ignored (requirement drift is checked
against node labels instead) and records hash version ``v3`` (``pkg/apis/v1/nodepool.go``). karpy
hashes the canonical JSON (sorted keys) of the same subset with SHA-256; the value differs from
Karpenter's FNV hash, so the version is recorded as ``karpy-v1`` to keep the two apart.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["HASH_VERSION", "nodepool_hash"]

HASH_VERSION = "karpy-v1"


def nodepool_hash(nodepool: dict[str, Any]) -> str:
    """Hex digest (16 characters) of the NodePool's template, requirements excluded."""
    template = json.loads(json.dumps(((nodepool.get("spec") or {}).get("template") or {}), default=str))
    (template.get("spec") or {}).pop("requirements", None)
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
