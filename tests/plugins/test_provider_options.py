"""``--provider-option NAME=VALUE`` and ``--cloud-provider`` on ``karpy simulate`` (and the flag's
parsing on ``karpy controller``), the typing of command-line option strings by a provider's
options model, and the serving of plugin NodeClass kinds."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from karpy_core.cli import parse_provider_options
from karpy_core.cloudprovider.options import ProviderOptions, coerce_text
from karpy_core.errors import ConfigurationError
from karpy_core.kube.port import KINDS, KindInfo, serve_kind
from tests.cli import invoke_cli


class _Options(ProviderOptions):
    provider: ClassVar[str] = "example"

    zones: list[str] | None = None
    sizes: tuple[int, ...] = ()
    tags: dict[str, str] = {}
    quota: int = 1
    spot: bool = False
    discount: float = 0.0


def test_parse_provider_options_keeps_strings_and_splits_on_the_first_equals() -> None:
    assert parse_provider_options(["zones=a,b", "tags={\"k\": \"v=w\"}", "empty="]) == {
        "zones": "a,b", "tags": '{"k": "v=w"}', "empty": ""}


@pytest.mark.parametrize(("flags", "message"), [
    (["zones"], "--provider-option expects NAME=value, got 'zones'"),
    (["my-zone=a"], "--provider-option 'my-zone': not an option name (letters, digits, '_')"),
    (["quota=1", "quota=2"], "--provider-option quota is given twice"),
])
def test_parse_provider_options_refuses(flags: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        parse_provider_options(flags)
    assert str(err.value) == message


def test_strings_are_read_as_the_model_declares() -> None:
    opts = _Options.parse({"zones": "a, b", "sizes": "[1, 2]", "tags": '{"team": "x"}', "quota": "3", "spot": "true",
                           "discount": "0.25"})
    assert (opts.zones, opts.sizes, opts.tags, opts.quota, opts.spot, opts.discount) == (["a", "b"], (1, 2), {"team": "x"}, 3, True, 0.25)
    python_values = _Options.parse({"zones": ["c"], "quota": 4})  # values from Python are left alone
    assert (python_values.zones, python_values.quota) == (["c"], 4)


def test_a_string_of_the_wrong_type_names_the_option_not_the_value() -> None:
    with pytest.raises(ConfigurationError) as err:
        _Options.parse({"quota": "s3cr3t"})
    assert str(err.value) == "example provider: invalid option(s): quota: Input should be a valid integer, unable to parse string as an integer"
    with pytest.raises(ConfigurationError) as err:
        _Options.parse({"tags": "not json"})
    assert str(err.value) == "example provider: invalid option(s): tags: expected an object in JSON; the text given is not one"
    with pytest.raises(ConfigurationError) as err:
        coerce_text("example", "max_pods", int | None, "lots")
    assert str(err.value) == "example provider: invalid option(s): max_pods: Input should be a valid integer, unable to parse string as an integer"
    assert coerce_text("example", "max_pods", int | None, "7") == 7


def test_simulate_default_is_the_simulated_provider() -> None:
    default = invoke_cli("simulate")
    explicit = invoke_cli("simulate", "--cloud-provider", "simulated")
    assert default.exit_code == explicit.exit_code == 0
    assert default.stdout.splitlines()[0] == "karpy simulate: cloud provider simulated, region us-east-1"
    assert explicit.stdout == default.stdout


def test_simulate_region_by_flag_or_by_option_is_the_same() -> None:
    by_flag = invoke_cli("simulate", "--region", "ap-northeast-2", "-o", "json")
    by_option = invoke_cli("simulate", "--provider-option", "region=ap-northeast-2", "-o", "json")
    assert by_flag.exit_code == by_option.exit_code == 0
    assert json.loads(by_flag.stdout)["provider"]["region"] == "ap-northeast-2"
    assert by_option.stdout == by_flag.stdout
    both = invoke_cli("simulate", "--region", "ap-northeast-2", "--provider-option", "region=us-east-1")
    assert both.exit_code == 2
    assert both.stderr.splitlines() == [
        "error: --provider-option region repeats an option already set by a dedicated flag (such as --region)"]


def test_simulate_catalog_settings_are_typed() -> None:
    out = invoke_cli("simulate", "--provider-option", "max_pods=8", "--provider-option", 'kube_reserved={"cpu": "1"}', "-o", "json")
    assert out.exit_code == 0, out.stderr
    nodes = json.loads(out.stdout)["nodes"]
    assert nodes and all(n["allocatable"]["pods"] == "8" for n in nodes)
    # kubeReserved cpu: 1 (whole cores left) instead of the default's fraction of a core
    assert all(_millicores(n["allocatable"]["cpu"]) % 1000 == 0 for n in nodes), [n["allocatable"] for n in nodes]
    default = json.loads(invoke_cli("simulate", "-o", "json").stdout)["nodes"]
    assert any(_millicores(n["allocatable"]["cpu"]) % 1000 for n in default)


def _millicores(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


@pytest.mark.parametrize(("args", "line"), [
    (["--cloud-provider", "nimbus"], "error: --cloud-provider 'nimbus' is not installed; installed: aws, kakaocloud, simulated"),
    (["--provider-option", "colour=blue"], "error: simulated provider: unknown option(s) colour; valid: ami_family, "
     "ephemeral_storage, eviction_hard, instance_store_policy, instance_types_file, kube_reserved, max_pods, "
     "node_classes, pods_per_core, region, reservations, reserved_enis, system_reserved, vm_memory_overhead_percent"),
    (["--provider-option", "max_pods=many"],
     "error: simulated provider: invalid option(s): max_pods: Input should be a valid integer, unable to parse string as an integer"),
    (["--provider-option", "region"], "error: --provider-option expects NAME=value, got 'region'"),
])
def test_simulate_bad_provider_or_option_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    out = invoke_cli("simulate", *args)
    assert out.exit_code == 2
    assert out.stderr.splitlines() == [line]


def test_controller_refuses_a_malformed_provider_option_before_connecting() -> None:
    out = invoke_cli("controller", "--cloud-provider", "simulated", "--provider-option", "max_pods")
    assert out.exit_code == 2
    assert out.stderr.splitlines()[-1] == "error: --provider-option expects NAME=value, got 'max_pods'"


def test_serve_kind_adds_once_and_refuses_a_second_group() -> None:
    info = KindInfo("example.test", "v1", "widgetnodeclasses", False)
    try:
        assert serve_kind("WidgetNodeClass", info) is True
        assert KINDS["WidgetNodeClass"].api_version == "example.test/v1"
        assert serve_kind("WidgetNodeClass", info) is False
        with pytest.raises(ValueError) as err:
            serve_kind("WidgetNodeClass", KindInfo("other.test", "v1", "widgetnodeclasses", False))
        assert str(err.value) == "kind WidgetNodeClass is served as example.test/v1; cannot serve it as other.test/v1 too"
    finally:
        KINDS.pop("WidgetNodeClass", None)
