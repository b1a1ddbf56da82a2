"""The ``karpy`` console script (``[project.scripts]`` in ``pyproject.toml``).

Importing :mod:`karpy_core.cli` (typer, pydantic, the API models) takes a few tenths of a second.
A Ctrl-C in that time would otherwise print the import's ``KeyboardInterrupt`` traceback, which the
README promises never to show. Until :func:`karpy_core.cli.main` installs its own handler, SIGINT
leaves at once as an interrupted command does: ``karpy: interrupted`` on stderr, exit 130.
"""

from __future__ import annotations

# The handler goes in as this module is imported, not when ``main`` is called (trial 23: 5 of 40
# SIGINTs 30-50 ms after start printed a KeyboardInterrupt traceback from this module's imports).
import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (128 + SIGINT), as :mod:`karpy_core.cli` uses."""


def _leave(signum: int, frame: FrameType | None) -> None:
    """SIGINT while karpy is still starting: one line on stderr and exit 130 at once (nothing has
    been done yet, so there is nothing to unwind)."""
    try:
        sys.stderr.write("karpy: interrupted\n")
        sys.stderr.flush()
    except Exception:  # stderr closed: leave anyway
        pass
    os._exit(EXIT_INTERRUPTED)


if os.path.basename(sys.argv[0] if sys.argv else "").removesuffix(".exe") == "karpy":
    # imported by the ``karpy`` script: karpy is starting (another importer, pytest say, keeps its own handler)
    signal.signal(signal.SIGINT, _leave)


def main() -> None:
    """Entry point of the ``karpy`` command: keeps the start-up SIGINT handler this module
    installed on import, then runs :func:`karpy_core.cli.main` (which replaces it with the
    commands' own)."""
    signal.signal(signal.SIGINT, _leave)
    from karpy_core.cli import main as cli_main

    cli_main()
