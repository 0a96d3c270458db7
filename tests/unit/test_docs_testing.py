"""docs/testing.md's pytest file runs as written, on the in-memory twin."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _example() -> str:
    text = (ROOT / "docs" / "testing.md").read_text()
    found = re.search(r'```python\n("""test_my_workflows\.py.*?)```', text, re.S)
    assert found, "docs/testing.md shows no test_my_workflows.py block"
    return found.group(1)


@pytest.mark.twin
def test_the_documented_in_memory_tests_pass(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "doc_test_my_workflows.py").write_text(_example())
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("doc_test_my_workflows")
    try:
        tests = [getattr(module, n) for n in dir(module) if n.startswith("test_")]
        assert len(tests) == 3
        for test in tests:
            test()
    finally:
        sys.modules.pop("doc_test_my_workflows", None)
