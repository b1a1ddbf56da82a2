"""Values of KCNodeClass fields that both the pydantic model (:mod:`karpy_kakaocloud.apis`) and the
CRD's rules (:mod:`karpy_kakaocloud.crd`) state, kept here so neither module imports the other's
(``apis`` reaches ``crd`` only when a CRD is generated)."""

from __future__ import annotations

import re

__all__ = ["KEY_NAME"]

KEY_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_-]*[a-zA-Z0-9]$")
"""A key pair name (``spec.keyName``, 4..250 characters): letters, digits, ``-`` and ``_``,
starting and ending with a letter or digit."""
