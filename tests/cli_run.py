"""Running the ``twinspect`` entry point in-process from tests (one definition for every CLI test)."""

from __future__ import annotations

import pytest

from twinspect.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    """Run ``twinspect ARGS...`` through :func:`twinspect.cli.main`.

    Args:
        capsys: pytest's capture fixture of the calling test.
        *args: command-line arguments (converted with ``str``).

    Returns:
        ``(exit code, stdout, stderr)``; exit code 0 when the command returned normally.
    """
    code: str | int | None = 0
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return (0 if code is None else int(code)), out, err
