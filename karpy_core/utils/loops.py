"""A provider background loop: run a pass, log a failure, wait, repeat (for ``karpy_controllers``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["every"]

log = logging.getLogger(__name__)


async def every(seconds: float, name: str, step: Callable[[], Awaitable[Any]]) -> None:
    """Await ``step()`` forever, ``seconds`` apart (0 for back-to-back, e.g. long polls). An
    exception from a pass is logged under ``name`` and the loop goes on; cancellation ends it."""
    while True:
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reconcile failed; retrying", extra={"controller": name})
        await asyncio.sleep(seconds)
