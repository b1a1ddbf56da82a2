"""The ``karpy`` console script (``[project.scripts]`` in ``pyproject.toml``).

Importing :mod:`karpy_core.cli` (typer, pydantic, the API models) takes a few tenths of a second.
A Ctrl-C in that time would otherwise print the import's ``KeyboardInterrupt`` traceback, which the
README promises never to show. Until :func:`karpy_core.cli.main` installs its own handler, SIGINT
leaves at once as an interrupted command does: ``karpy: interrupted`` on stderr, exit 130.
"""

from __future__ import annotations

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


def main() -> None:
    """Entry point of the ``karpy`` command: installs the start-up SIGINT handler, then runs
    :func:`karpy_core.cli.main` (which replaces it with the commands' own)."""
    signal.signal(signal.SIGINT, _leave)
    from karpy_core.cli import main as cli_main

    cli_main()
