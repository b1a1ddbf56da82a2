"""What trial 9's fuzzer found karpy accepting that kube-apiserver (or Karpenter's CRD) refuses,
through ``karpy validate`` and ``karpy simulate`` as a user runs them: each input under
``tests/data/trial9/`` (copied from the fuzzer's findings) gives one problem line naming the
field, with the server's wording, and exit 2. The server's side of each is checked by
``tests/integration/test_trial9_apiserver.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke_cli
from tests.test_input_classes import _problems

DATA = Path(__file__).parent / "data" / "trial9"


def _refused(name: str) -> str:
    """The one problem line of ``tests/data/trial9/<name>.yaml``, the same through validate and simulate."""
    seen = []
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(DATA / f"{name}.yaml"))
        assert result.exit_code == 2, (command, result.output)
        seen.append(_problems(result))
    assert seen[0] == seen[1], seen
    (line,) = seen[0]
    return line


@pytest.mark.parametrize(("name", "where", "problem"), [
    ("c0096_np_bad_key", "doc 1 NodePool/general-purpose: spec.template.spec: requirements[5].key",
     'Invalid value: "karpenter.sh/nodepool": label "karpenter.sh/nodepool" is restricted'),
])
def test_refused_with_the_servers_wording(name: str, where: str, problem: str) -> None:
    line = _refused(name)
    assert line.startswith(f"{DATA / name}.yaml {where}: "), line
    assert problem in line, line
