"""The ``--hook-timeout`` watchdog (karpy_core/cloudprovider/watch.py) counts its timeout from a
plugin's last progress, not from the call's start (yaml47): a hook that retries and says so
(:func:`~karpy_core.cloudprovider.watch.progress`), or whose plugin answers its other calls one at a
time, is not given up on while it moves; one that does not move is, naming --hook-timeout and how to
raise it; ``--hook-timeout 0`` waits forever."""

from __future__ import annotations

import asyncio
import io

import pluggy

from karpy_core.cloudprovider import hookimpl, hookspecs
from karpy_core.cloudprovider.calls import call_hook
from karpy_core.cloudprovider.watch import HookWatch, progress, watch_hooks


class _Exits:
    """Stands for ``os._exit``: records the codes (the hook then ends by itself)."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    def __call__(self, code: int) -> None:
        self.codes.append(code)


def _manager(plugin: object) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    return pm


class Retrying:
    """A hook retrying 6 times 0.3 s apart (1.8 s in all), saying so before each wait, as tenacity's
    ``before_sleep`` would."""

    @hookimpl
    async def karpy_list(self) -> list[object]:
        for _ in range(6):
            progress()
            await asyncio.sleep(0.3)
        return []


def test_a_hook_that_retries_and_says_so_is_not_given_up_on_past_the_timeout() -> None:
    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=1.0, report_after=1.2, report_every=10.0), stream=stream, exit_process=exits):
        assert asyncio.run(call_hook(_manager(Retrying()), "retry", "karpy_list")) == []
    assert exits.codes == []
    (line,) = stream.getvalue().splitlines()
    assert line.startswith("karpy: waiting for cloud provider plugin 'retry': karpy_list has not answered for 1 s "
                           "(karpy gives up after 1 s without progress, --hook-timeout; last progress 0 s ago)"), line


class OneAtATime:
    """A plugin that answers its calls one at a time (0.5 s each), as a rate-limited cloud API does."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()

    @hookimpl
    async def karpy_list(self) -> list[object]:
        async with self.lock:
            await asyncio.sleep(0.5)
        return []


def test_calls_queued_behind_answered_ones_are_not_given_up_on() -> None:
    plugin = OneAtATime()
    pm = _manager(plugin)

    async def five() -> list[object]:
        plugin.lock = asyncio.Lock()
        return await asyncio.gather(*(call_hook(pm, "queue", "karpy_list") for _ in range(5)))

    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=1.2, report_after=10.0), stream=stream, exit_process=exits):
        assert asyncio.run(five()) == [[]] * 5  # 2.5 s in all, the last call waited 2.5 s, the plugin moved every 0.5 s
    assert exits.codes == [] and stream.getvalue() == ""


class Stuck:
    """A hook that calls progress once, then waits 2 s without a word."""

    @hookimpl
    async def karpy_list(self) -> list[object]:
        await asyncio.sleep(0.5)
        progress()
        await asyncio.sleep(1.5)
        return []


def test_a_hook_that_stops_moving_is_given_up_on_naming_the_option_and_how_to_raise_it() -> None:
    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=1.0, report_after=10.0), stream=stream, exit_process=exits):
        asyncio.run(call_hook(_manager(Stuck()), "stuck", "karpy_list"))
    assert exits.codes == [1]
    assert stream.getvalue().splitlines() == [
        "error: cloud provider plugin 'stuck': karpy_list has not answered for 1 s, without progress for the last 1 s "
        "(--hook-timeout); karpy gave up: to wait longer, run again with --hook-timeout 60 (seconds; 0 waits forever)"]


def test_hook_timeout_0_waits_forever_and_still_names_the_hook() -> None:
    class Slow:
        @hookimpl
        async def karpy_list(self) -> list[object]:
            await asyncio.sleep(1.0)
            return []

    stream, exits = io.StringIO(), _Exits()
    with watch_hooks(HookWatch(timeout=0, report_after=0.5), stream=stream, exit_process=exits):
        assert asyncio.run(call_hook(_manager(Slow()), "slow", "karpy_list")) == []
    assert exits.codes == []
    assert stream.getvalue().splitlines() == [
        "karpy: waiting for cloud provider plugin 'slow': karpy_list has not answered for 0 s (--hook-timeout 0: karpy waits)"]


def test_progress_outside_a_watched_call_does_nothing() -> None:
    progress()  # no watchdog
    with watch_hooks(HookWatch(timeout=1.0)):
        progress()  # a watchdog, but no hook call
