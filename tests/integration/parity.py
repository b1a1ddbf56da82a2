"""The shared body of the "server vs loader" parity tests (test_trial5/9, test_yaml46, test_val48
``_apiserver.py``): one object POSTed to the real kube-apiserver with ``dryRun=All`` and
``fieldValidation=Strict`` (:func:`tests.integration.test_trial3_apiserver.dry_run`; a cluster-scoped
NodePool to its own collection) and given to karpy's loader; both must accept it, or both refuse it
with a phrase both answers hold."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from karpy_core.errors import KubeAPIError
from tests.integration.test_trial3_apiserver import dry_run, loader_problems

__all__ = ["assert_loader_agrees", "server_answer"]


async def server_answer(kube: Any, obj: dict[str, Any], statuses: Collection[int] = (400, 422)) -> str:
    """The API server's refusal of ``obj`` (its message), or ``""`` when it would store it. A
    refusal with a status outside ``statuses`` fails the test."""
    try:
        if obj["kind"] == "NodePool":  # cluster-scoped: dry_run's path is namespaced
            await kube._request("POST", "/apis/karpenter.sh/v1/nodepools",
                                query=[("dryRun", "All"), ("fieldValidation", "Strict")], body=obj)
        else:
            await dry_run(kube, obj)
    except KubeAPIError as exc:
        assert exc.status in statuses, exc
        return str(exc)
    return ""


async def assert_loader_agrees(kube: Any, case: str, obj: dict[str, Any], accepted: bool, phrase: str,
                               statuses: Collection[int] = (400, 422)) -> None:
    """Assert the API server and the loader both accept ``obj`` (``accepted``), or both refuse it
    with ``phrase`` in both answers (``""``: any words)."""
    server = await server_answer(kube, obj, statuses)
    mine = "\n".join(loader_problems(obj))
    assert (not server) is accepted and (not mine) is accepted, (case, server, mine)
    assert phrase in server and phrase in mine, (case, phrase, server, mine)
