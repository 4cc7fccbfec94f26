"""Where the shared trace data sits for tests: ``../shared/traces`` beside the repository.

A checkout made with ``git worktree`` one level further down looks one directory higher.
Tests that need the data skip when neither place has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def traces_dir() -> Path:
    for base in (REPO_ROOT.parent, REPO_ROOT.parent.parent):
        candidate = base / "shared" / "traces"
        if candidate.is_dir():
            return candidate
    pytest.skip("../shared/traces is not beside the repository")


def alibaba_dir() -> Path:
    path = traces_dir() / "alibaba-gpu-v2023"
    if not path.is_dir():
        pytest.skip(f"{path} is absent")
    return path


def paper_results() -> Path:
    path = traces_dir() / "fgd-results" / "analysis_allo_discrete.csv"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    return path
