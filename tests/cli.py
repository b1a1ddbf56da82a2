"""Running the ``karpy`` CLI in-process for tests."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from karpy_core.cli import app


def invoke_cli(*args: str) -> Result:
    """Run ``karpy ARGS`` in-process; asserts that it printed no traceback and ended by exiting
    (never by an uncaught exception). Returns typer's result (exit_code, stdout, stderr)."""
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result
