"""examples/data_driven runs as its README says (on DynamoDB Local)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from whimbrel import Whimbrel

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "data_driven"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_the_data_driven_example(wb: Whimbrel) -> None:
    run = _load("run")
    out = run.run(wb)
    assert out["thumbnails"] == ("COMPLETED", {"thumbnails": 29, "failed": 1})
    state, report = out["handled"]
    assert state == "COMPLETED" and report["thumbnails"] == 0
    assert "thumbnail FAILED" in report["alert"]
    failed, ended, published, again = out["album"]
    assert (failed, ended, again) == ("FAILED", "COMPLETED", 0)
    assert published == {"published": "summer", "thumbnails": 12, "failed": 0}
