"""docs/cloudprovider.md's example provider, tinycloud, built and run from the page itself.

The test writes the page's marked files to a temporary directory, installs the package into an
isolated virtualenv with karpy (:mod:`tests.plugins.docplugin`), and runs what the page says:
``karpy providers`` lists it, ``karpy validate`` accepts its NodeClass and names a bad field,
``karpy simulate --cloud-provider tinycloud`` binds the Deployment's pods on tinycloud's nodes,
provider options are typed by its options model, the CRD snippet renders, and the page's test
modules (karpy's conformance kit and the plugin's unit tests) pass against it. The controller side
runs against the real API server in ``tests/integration/test_plugin_controller_e2e.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.plugins.docplugin import CRD_SNIPPET, DOC, Env, doc_files, installed_doc_plugin

CATALOG_TINY = {"tiny.small", "tiny.medium"}


def test_the_page_marks_a_whole_package() -> None:
    files = doc_files()
    assert set(files) == {"pyproject.toml", "karpy_tinycloud/__init__.py", "karpy_tinycloud/apis.py",
                          "karpy_tinycloud/plugin.py", "tests/test_conformance.py", "tests/test_tinycloud.py", "examples/cluster.yaml",
                          "examples/scenario.yaml"}
    pyproject = files["pyproject.toml"]
    assert 'tinycloud = "karpy_tinycloud.plugin:create_plugin"' in pyproject
    assert 'tinycloud = "karpy_tinycloud.apis:api_kinds"' in pyproject
    # the entry-point snippet of section 1 is the one in the whole pyproject.toml
    section1 = DOC.read_text().split("## 2.")[0]
    assert '[project.entry-points."karpy.cloudprovider"]\ntinycloud = "karpy_tinycloud.plugin:create_plugin"' in section1
    assert '[project.entry-points."karpy.cloudprovider"]\ntinycloud = "karpy_tinycloud.plugin:create_plugin"' in pyproject


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with installed_doc_plugin(tmp_path_factory.mktemp("doc-plugin")) as installed:
        yield installed


# ------------------------------------------------------------------------------ what the page says
def test_installs_quickly_and_is_listed(env: Env) -> None:
    print(f"plugin virtualenv ready in {env.seconds['venv']:.1f} s, example installed in {env.seconds['install']:.1f} s")
    out = env.karpy("providers")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["aws", "kakaocloud", "simulated", "tinycloud"]


def test_validate_accepts_the_nodeclass_and_names_a_bad_field(env: Env) -> None:
    ok = env.karpy("validate", "examples/cluster.yaml")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "valid: 1 Deployment, 1 NodePool, 1 TinyNodeClass"
    good = (env.package / "examples" / "cluster.yaml").read_text()
    bad = env.package / "bad.yaml"
    bad.write_text(good.replace("  image: img-2026a\n", "  image: ubuntu\n  imageId: img-1\n", 1))
    out = env.karpy("validate", bad)
    assert out.returncode == 2
    problems = [line for line in out.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 2, out.stderr
    assert "TinyNodeClass/default: spec.image: String should match pattern '^img-[a-z0-9]+$'; got 'ubuntu'" in problems[0]
    assert 'TinyNodeClass/default: spec.imageId: unknown field "imageId"' in problems[1]


def _simulate(env: Env, *args: str) -> dict:
    out = env.karpy("simulate", "--cloud-provider", "tinycloud", *args, "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_simulate_binds_the_pods_on_tinycloud_nodes(env: Env) -> None:
    report = _simulate(env, "examples/cluster.yaml")
    assert report["provider"]["name"] == "tinycloud"
    assert report["ignored"] == []  # the TinyNodeClass is stored by the in-memory cluster
    pods = report["pods"]
    assert len(pods) == 6 and all(p["node"] for p in pods), pods
    nodes = report["nodes"]
    # what the page says: two tiny.medium on-demand nodes, 3 pods each, 0.10 USD/hour each
    assert [(n["instance_type"], n["capacity_type"], n["price_per_hour"], len(n["pods"])) for n in nodes] == \
        [("tiny.medium", "on-demand", 0.1, 3)] * 2
    for n in nodes:
        assert n["instance_type"] in CATALOG_TINY and n["zone"] in ("tiny-1a", "tiny-1b")
        assert n["labels"]["tinycloud.example.com/instance-family"] == "tiny"
        assert n["labels"]["karpenter.sh/nodepool"] == "default"
    launches = [e for e in report["events"] if e["kind"] == "launch"]
    assert len(launches) == 2 and all(e["details"]["providerID"].startswith("tinycloud:///tiny-1") for e in launches)


def test_simulate_provider_options_are_typed_by_the_options_model(env: Env) -> None:
    report = _simulate(env, "examples/cluster.yaml", "--provider-option", "zones=tiny-1b", "--provider-option", "max_instances=1")
    assert [(n["instance_type"], n["zone"]) for n in report["nodes"]] == [("tiny.medium", "tiny-1b")]
    pending = [p for p in report["pods"] if not p["node"]]
    assert len(pending) == 3
    assert all("no available offering" in (p["reason"] or "") for p in pending), pending
    bad = env.karpy("simulate", "--cloud-provider", "tinycloud", "--provider-option", "max_instances=many", "examples/cluster.yaml")
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "error: tinycloud provider: invalid option(s): max_instances: Input should be a valid integer, unable to parse string as an integer"]
    unknown = env.karpy("simulate", "--cloud-provider", "tinycloud", "--provider-option", "colour=blue", "examples/cluster.yaml")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [
        "error: tinycloud provider: unknown option(s) colour; valid: cluster_name, max_instances, spot_discount, zones"]
    missing = env.karpy("simulate", "--cloud-provider", "nimbus", "examples/cluster.yaml")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "error: --cloud-provider 'nimbus' is not installed; installed: aws, kakaocloud, simulated, tinycloud"]


def test_a_scenario_consolidates_and_drifts_on_the_plugin(env: Env) -> None:
    report = _simulate(env, "examples/scenario.yaml")
    disruptions = [(e["t"], e["reason"]) for e in report["events"] if e["kind"] == "disrupt"]
    assert [reason for _, reason in disruptions] == ["Empty", "Underutilized", "Drifted"], disruptions
    assert 1800 <= disruptions[0][0] <= disruptions[1][0] < 3600 <= disruptions[2][0]  # scaled at 30m, new image at 1h
    drifted = [(e["t"], e["reason"]) for e in report["events"] if e["kind"] == "drifted"]
    assert len(drifted) == 1 and drifted[0][1] == "ImageDrift" and drifted[0][0] >= 3600  # the plugin's karpy_is_drifted
    assert [(n["instance_type"], n["price_per_hour"], len(n["pods"])) for n in report["nodes"]] == [("tiny.small", 0.05, 1)]
    assert (report["cost_over_time"][-1]["nodes"], report["cost_over_time"][-1]["cost_per_hour"]) == (1, 0.05)


def test_simulate_without_the_nodeclass_launches_nothing(env: Env) -> None:
    good = (env.package / "examples" / "cluster.yaml").read_text()
    without = env.package / "no-nodeclass.yaml"
    without.write_text(good.split("---\n", 1)[1])
    report = _simulate(env, str(without))
    assert report["nodes"] == []
    assert all("NodeClass not found on cluster (TinyNodeClass/default)" in (p["reason"] or "") for p in report["pods"]), report["pods"]


def test_the_crd_snippet_renders_the_nodeclass_crd(env: Env) -> None:
    m = CRD_SNIPPET.search(DOC.read_text())
    assert m is not None, "the CRD snippet is missing from the page"
    out = env.python("-c", m.group(1))
    assert out.returncode == 0, out.stderr
    import yaml

    crd = yaml.safe_load(out.stdout)
    assert m.group(2) == "tinycloud.example.com_tinynodeclasses.yaml"
    assert crd["metadata"]["name"] == "tinynodeclasses.tinycloud.example.com"
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["kind"] == "TinyNodeClass"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["image"]["pattern"] == "^img-[a-z0-9]+$" and spec["required"] == ["image"]


def test_the_conformance_kit_and_unit_tests_pass(env: Env) -> None:
    out = env.python("-m", "pytest", "-v", "-p", "no:cacheprovider", "tests")
    assert out.returncode == 0, out.stdout[-4000:]
    # the kit's 8 checks (create idempotent by NodeClaim name, get answering the instance asked
    # for among them) and the page's 3 unit tests
    assert re.search(r"^=+ 11 passed", out.stdout.splitlines()[-1]), out.stdout[-2000:]
    assert "test_get_answers_the_instance_asked_for PASSED" in out.stdout, out.stdout[-4000:]
    assert "test_create_is_idempotent_by_nodeclaim_name PASSED" in out.stdout, out.stdout[-4000:]


def test_controller_takes_provider_options(env: Env) -> None:
    out = env.karpy("controller", "--cloud-provider", "tinycloud", "--provider-option", "zones")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["error: --provider-option expects NAME=value, got 'zones'"]


def test_steps_on_the_plugins_nodeclass_are_checked_alike_by_validate_and_simulate(env: Env) -> None:
    """Trial 22: a patch of a TinyNodeClass a step had deleted was ``valid:`` for ``validate`` and a
    404 for ``simulate``; only the built-in NodeClass kinds were tracked step by step."""
    scenario = env.package / "examples" / "deleted-twice.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: twice}\nuntil: 2h\nsteps:\n"
                        "  - {at: 0s, apply: cluster.yaml}\n"
                        "  - {at: 30m, delete: {kind: TinyNodeClass, name: default}}\n"
                        "  - {at: 1h, patch: {kind: TinyNodeClass, name: default, patch: {spec: {image: img-2026c}}}}\n"
                        "  - {at: 90m, delete: {kind: TinyNodeClass, name: other}}\n")
    expected = [f"  - {scenario}: steps[2].patch: 404 NotFound: TinyNodeClass/default does not exist at 1h "
                "(steps[1] deleted it at 30m)",
                f"  - {scenario}: steps[3].delete: 404 NotFound: TinyNodeClass/other does not exist at 1h30m "
                "(no earlier step applies it)"]
    for command in (["validate"], ["simulate", "--cloud-provider", "tinycloud"]):
        out = env.karpy(*command, str(scenario))
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert out.stderr.splitlines()[1:] == expected, (command, out.stderr)


def test_nodes_still_running_after_their_nodeclass_is_deleted_keep_their_price(env: Env) -> None:
    """Trial 22: once a step deleted the TinyNodeClass, the provider lists no types for its
    NodePool, and the node table priced the running nodes ``-`` (0.0000 total) beside a summary
    billing them."""
    scenario = env.package / "examples" / "delete-nodeclass.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: gone}\nuntil: 2h\nsteps:\n"
                        "  - {at: 0s, apply: cluster.yaml}\n"
                        "  - {at: 1h, delete: {kind: TinyNodeClass, name: default}}\n")
    report = _simulate(env, str(scenario))
    prices = [n["price_per_hour"] for n in report["nodes"]]
    assert prices and all(p is not None and p > 0 for p in prices), report["nodes"]
    assert round(sum(prices), 6) == report["cost_over_time"][-1]["cost_per_hour"] > 0
    text = env.karpy("simulate", "--cloud-provider", "tinycloud", str(scenario))
    assert text.returncode == 0, text.stderr
    assert "the node table's total is" not in text.stdout and " - " not in text.stdout.split("total:")[0], text.stdout
