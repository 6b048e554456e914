"""Shared pytest fixtures: repository root, the ../shared data folder, the bundled clone example."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT / ".." / "shared"
EXAMPLES_DIR = REPO_ROOT / "twinspect" / "examples" / "clones"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ci: slow test that still runs in CI (pytest -m 'not slow or ci')")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """Root of the twinspect repository (the folder holding pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The ../shared data folder beside the repository; skips the test when it is absent."""
    path = SHARED_DIR.resolve()
    if not path.is_dir():
        pytest.skip(f"shared data folder not found at {path} (expected beside the repository)")
    return path


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """The bundled example codebase with known clones (see its MANIFEST.md)."""
    return EXAMPLES_DIR


@pytest.fixture(scope="session")
def email_frags() -> list:
    """Functions of the stdlib's ``email`` package (a few hundred real fragments), mined in-process."""
    import email

    from twinspect.code.fragments import mine

    frags, _ = mine([Path(email.__file__).parent], workers=1)
    assert len(frags) > 200
    return frags


@pytest.fixture()
def email_tree(tmp_path) -> Path:
    """A writable copy of the stdlib's ``email`` package (29 Python files, no ``__pycache__``) under ``tmp_path``."""
    import email
    import shutil

    dst = tmp_path / "email"
    shutil.copytree(Path(email.__file__).parent, dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst
