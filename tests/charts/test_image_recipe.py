"""deploy/Dockerfile and hack/image.py describe the same controller image (no build, no root needed)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _image_module():
    name = "karpy_image"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "hack" / "image.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _runtime_stage() -> dict[str, list[str]]:
    """Instructions of the Dockerfile's runtime stage: {INSTRUCTION: [argument, ...]} (continuations joined)."""
    text = (REPO / "deploy" / "Dockerfile").read_text()
    stage = text[text.index("AS runtime"):]
    joined = re.sub(r"\\\n\s*", " ", stage)
    out: dict[str, list[str]] = {}
    for line in joined.splitlines():
        if line and not line.startswith("#") and line.split()[0].isupper():
            word, _, rest = line.partition(" ")
            out.setdefault(word, []).append(rest.strip())
    return out


def _expand(value: str, cloud: str) -> str:
    """A Dockerfile value as built with ``--build-arg CLOUD=<cloud>`` and no ``PROVIDER`` (the
    in-tree clouds: ``${PROVIDER:-${CLOUD}}`` is the cloud)."""
    return value.replace("${PROVIDER:-${CLOUD}}", cloud).replace("${CLOUD}", cloud)


@pytest.mark.parametrize("cloud", ["aws", "kakaocloud"])
def test_dockerfile_matches_the_debian_image_recipe(cloud):
    config, labels = _image_module().image_config(cloud)
    stage = _runtime_stage()
    assert json.loads(stage["ENTRYPOINT"][0]) == config["entrypoint"] == ["/opt/karpy/bin/karpy", "controller"]
    assert stage["USER"] == [config["user"]] == ["65532:65532"]
    assert stage["WORKDIR"] == [config["workingdir"]]
    assert sorted(f"{p}/tcp" for p in stage["EXPOSE"][0].split()) == sorted(config["exposedports"])
    env = dict(pair.split("=", 1) for pair in stage["ENV"][0].split())
    image_env = dict(item.split("=", 1) for item in config["env"])
    assert set(env) == set(image_env)
    for key in set(env) - {"PATH"}:
        assert _expand(env[key], cloud) == image_env[key], key
    assert env["PATH"].startswith("/opt/karpy/bin:") and image_env["PATH"].startswith("/opt/karpy/bin:")
    docker_labels = dict(re.findall(r'([\w.]+)="([^"]*)"', stage["LABEL"][0]))
    assert set(docker_labels) == set(labels) - {"org.opencontainers.image.base.name"}
    for key, value in docker_labels.items():
        expected = labels[key]
        assert _expand(value, cloud).replace("${VERSION}", _image_module().version()) == expected, key
    assert labels["io.github.karpy.cloud"] == cloud


def test_host_tools_are_installed_only_when_missing_and_apt_lists_refreshed_only_on_failure(monkeypatch):
    im = _image_module()
    calls: list[list[str]] = []
    present = {"apt-get": "/usr/bin/apt-get"}
    monkeypatch.setattr(im.shutil, "which", lambda cmd: present.get(cmd))
    monkeypatch.setattr(im.os, "geteuid", lambda: 0)
    results = iter([1, 0, 0])  # install fails with stale lists, update works, install works

    def fake_run(argv, **kwargs):
        calls.append(list(argv))
        return im.subprocess.CompletedProcess(argv, next(results), "", "")

    monkeypatch.setattr(im.subprocess, "run", fake_run)
    im.ensure_host_tools()
    assert [c[:2] for c in calls] == [["apt-get", "install"], ["apt-get", "update"], ["apt-get", "install"]]
    assert calls[0][-2:] == ["mmdebstrap", "umoci"]
    # a machine that has the tools runs nothing
    calls.clear()
    present.update(mmdebstrap="/usr/bin/mmdebstrap", umoci="/usr/bin/umoci")
    im.ensure_host_tools()
    assert calls == []
