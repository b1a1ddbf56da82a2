"""What a fresh plugin author's mistakes tell the user of ``karpy simulate`` and ``karpy validate
--cloud-provider`` (fresh-user trial 7, the ``acme`` plugin): one line naming the plugin, the hook
and the mistake, never a traceback, never a silent hang or a wrong total."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from karpy_core.cloudprovider.calls import check_instance_types, instance_type_problem
from karpy_core.cloudprovider.options import ProviderOptions
from karpy_core.errors import ConfigurationError, PluginHookError
from tests.cli import invoke_cli
from tests.plugins import mistakeplugin

ROOT = Path(__file__).resolve().parents[2]
FILES = (str(ROOT / "examples/nodepools/general-purpose.yaml"), str(ROOT / "examples/workloads/inflate.yaml"))


@pytest.fixture(autouse=True)
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mistakeplugin.register(monkeypatch)
    monkeypatch.chdir(tmp_path)


def _run(command: str, mistake: str, *args: str, provider: str = mistakeplugin.NAME) -> tuple[int, str, str]:
    paths = FILES if command == "simulate" else FILES[:1]
    result = invoke_cli(command, "--cloud-provider", provider, "--provider-option", f"mistake={mistake}", *paths, *args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_a_hookimpl_with_a_wrong_argument_name_is_one_line_naming_plugin_hook_and_argument(command: str) -> None:
    code, _, err = _run(command, "wrong_arg")
    assert code == 2
    assert err.strip().splitlines() == [
        "error: cloud provider plugin 'mistake': hook karpy_create declares argument(s) claim that its hookspec "
        "does not take; karpy_create takes (nodeclaim)"]


# ---------------------------------------------------------------------- a hook that never answers
class _Exits:
    """Stands for ``os._exit`` in the watchdog: records the code (the hang then ends by itself)."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    def __call__(self, code: int) -> None:
        self.codes.append(code)


def test_a_hook_that_does_not_answer_is_named_while_waited_for_then_given_up_on() -> None:
    import asyncio
    import io

    import pluggy

    from karpy_core.cloudprovider import hookimpl, hookspecs
    from karpy_core.cloudprovider.calls import call_hook
    from karpy_core.cloudprovider.watch import HookWatch, watch_hooks

    class Slow:
        @hookimpl
        async def karpy_list(self) -> list[object]:
            await asyncio.sleep(1.6)
            return []

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(Slow())
    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=1.2, report_after=0.5, report_every=10.0), stream=stream, exit_process=exits):
        assert asyncio.run(call_hook(pm, "slow", "karpy_list")) == []
    lines = stream.getvalue().splitlines()
    assert lines == ["karpy: waiting for cloud provider plugin 'slow': karpy_list has not answered for 0 s "
                     "(karpy gives up after 1.2 s without progress, --hook-timeout)",
                     "error: cloud provider plugin 'slow': karpy_list did not answer within 1.2 s (--hook-timeout); "
                     "karpy gave up: to wait longer, run again with --hook-timeout 60 (seconds; 0 waits forever)"]
    assert exits.codes == [1]


def test_a_hook_answering_in_time_is_not_named() -> None:
    import asyncio
    import io

    import pluggy

    from karpy_core.cloudprovider import hookimpl, hookspecs
    from karpy_core.cloudprovider.calls import call_hook
    from karpy_core.cloudprovider.watch import HookWatch, watch_hooks

    class Quick:
        @hookimpl
        async def karpy_list(self) -> list[object]:
            await asyncio.sleep(0.3)
            return []

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(Quick())
    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=5, report_after=1.0), stream=stream, exit_process=exits):
        asyncio.run(call_hook(pm, "quick", "karpy_list"))
    assert stream.getvalue() == "" and exits.codes == []


@pytest.mark.parametrize(("mistake", "hook"), [("git_hang", "karpy_get_instance_types"),
                                                ("git_block", "karpy_get_instance_types"),
                                                ("create_hang", "karpy_create"), ("note_block", "karpy_pricing_note")])
def test_simulate_gives_up_on_a_hook_that_hangs_naming_plugin_and_hook(
        monkeypatch: pytest.MonkeyPatch, mistake: str, hook: str) -> None:
    from karpy_core.cloudprovider import watch

    exits = _Exits()
    monkeypatch.setattr(watch, "EXIT", exits)
    code, _, err = _run("simulate", mistake, "--hook-timeout", "1", "--provider-option", "hang_seconds=2")
    assert exits.codes == [1], (code, err)  # os._exit(1) in a real run; here the hang ends by itself, the run goes on
    assert any(line.startswith(f"error: cloud provider plugin 'mistake': {hook}") and
               line.endswith("did not answer within 1 s (--hook-timeout); karpy gave up: to wait longer, run again with "
                             "--hook-timeout 60 (seconds; 0 waits forever)") for line in err.splitlines()), err


def test_hook_timeout_must_not_be_negative() -> None:
    code, _, err = _run("simulate", "", "--hook-timeout", "-1")
    assert code == 2 and "--hook-timeout must be 0 (wait forever) or more seconds, not -1" in err


# ---------------------------------------------------------------------- instance types checked at run time
@pytest.mark.parametrize(("mistake", "problem"), [
    ("price_nan", "with offering price nan ("),
    ("price_inf", "with offering price inf ("),
    ("price_negative", "with offering price -0.5 ("),
    ("dup_names", "twice (names must be unique)"),
    ("no_zone", "with an offering without a zone"),
    ("price_str", "with offering price '0.1' (str) (on-demand in "),
    ("cpu_zero", "with capacity cpu 0, expected > 0 (millicores)"),
    ("cpu_str", "with capacity cpu '4' (str), expected an int in internal units (millicores;"),
    ("pods_float", "with capacity pods 58.0 (float), expected an int in internal units (pods;"),
    ("overhead_none", "with overhead None (NoneType), expected an Overhead"),
])
def test_simulate_refuses_ill_formed_instance_types_in_one_line(mistake: str, problem: str) -> None:
    code, out, err = _run("simulate", mistake)
    assert code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: cloud provider plugin 'mistake': karpy_get_instance_types returned instance type '")
    assert problem in lines[0]


def test_free_offerings_are_accepted_and_the_optimum_line_is_printed() -> None:
    code, out, _ = _run("simulate", "price_zero")
    assert code == 0
    assert "0.0000 USD/hour" in out
    assert ("optimum: 0.0000 USD/hour for the 1 pod on launched nodes (free offerings: no plan costs less than 0): "
            "karpy's plan is optimal") in out.splitlines()


def test_instance_type_problem_names_the_first_offending_type() -> None:
    from karpy_core.cloudprovider import InstanceType, Offering
    from karpy_core.scheduling.requirements import Requirements

    def it(name: str, *offerings: Offering) -> InstanceType:
        return InstanceType(name=name, requirements=Requirements.of(), offerings=list(offerings),
                            capacity={"cpu": 1000, "memory": 2**30, "pods": 10})

    good = it("a", Offering("z1", "on-demand", 0.1), Offering("z1", "spot", 0.0))
    assert instance_type_problem([good]) == ""
    assert instance_type_problem([good, it("b", Offering("z1", "spot", float("nan")))]) == (
        "instance type 'b' with offering price nan (spot in z1), expected a finite price >= 0 (USD/hour)")
    assert instance_type_problem([good, it("c", Offering("z1", "", 1.0))]) == (
        "instance type 'c' with an offering without a capacity type (? in z1)")
    assert instance_type_problem([good, good]) == "instance type 'a' twice (names must be unique)"
    with pytest.raises(PluginHookError, match=r"^cloud provider plugin 'p': karpy_get_instance_types returned instance "
                                              r"type 'd' with offering price -1.0"):
        check_instance_types("p", [it("d", Offering("z1", "on-demand", -1.0))])


# ---------------------------------------------------------------------- no karpy.apis entry point
@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_a_nodeclass_kind_without_a_model_is_named_the_same_in_simulate_and_validate(command: str) -> None:
    code, _, err = _run(command, "unmodelled_kind")
    assert code == 1
    assert err.strip().splitlines() == [
        "error: cloud provider 'mistake' serves NodeClass kind mistake.example.com MistakeNodeClass but registers no "
        "model for it: its distribution needs an entry point in group karpy.apis returning the kind's pydantic model "
        "(docs/cloudprovider.md, section 2)"]


# ---------------------------------------------------------------------- small ones
def test_an_entry_point_whose_module_is_missing_names_the_plugin_and_the_entry_point() -> None:
    result = invoke_cli("simulate", "--cloud-provider", mistakeplugin.GONE, *FILES)
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: cloud provider 'mistake-gone' (entry point karpy.cloudprovider: mistake-gone = "
        "tests.plugins.no_such_module:create_plugin) failed to import: No module named 'tests.plugins.no_such_module'"]


def test_create_plugin_returning_none_is_said_as_such() -> None:
    code, _, err = _run("simulate", "return_none")
    assert code == 2
    assert err.strip().splitlines() == [
        "error: cloud provider plugin 'mistake': its factory (create_plugin) returned None, expected the plugin object "
        "carrying its @hookimpl methods"]


def test_an_async_karpy_name_is_one_line_and_its_coroutine_is_closed() -> None:
    import gc

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code, _, err = _run("simulate", "async_name")
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]
    assert code == 1
    [line] = err.strip().splitlines()
    assert line.startswith("error: cloud provider plugin 'mistake': karpy_name returned coroutine <coroutine object ")
    assert line.endswith(", expected a non-empty str")


def test_the_unknown_option_message_leaves_out_the_host_options() -> None:
    from typing import Any, ClassVar

    class Options(ProviderOptions):
        provider: ClassVar[str] = "acme"
        zones: list[str] = []
        kube: Any = None

    with pytest.raises(ConfigurationError) as info:
        Options.parse({"bogus": "1"})
    assert str(info.value) == "acme provider: unknown option(s) bogus; valid: zones"
