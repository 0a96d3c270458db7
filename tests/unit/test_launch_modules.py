"""The modules a worker serves (whimbrel/launch/modules.py): the names checked, the
modules imported, the code workflows in them found — what ``run_worker`` and the
deployed Lambdas (``WHIMBREL_MODULES``) share."""

from __future__ import annotations

import types

import pytest
import wb_code_workflows
import wb_deployed_workflows

from whimbrel import InvalidInput
from whimbrel.launch.modules import code_workflows, import_modules, module_names


def test_module_names_read_a_list_or_the_variable_text() -> None:
    assert module_names("shop.workflows, billing  shop.workflows") == (
        "shop.workflows", "billing")
    assert module_names(["a_1.b", "c"]) == ("a_1.b", "c")
    assert module_names("") == ()


@pytest.mark.parametrize("bad", ["shop/workflows", "1st", "shop.", "shop..x", "a-b"])
def test_a_name_that_is_no_module_name_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidInput, match=f"WHIMBREL_MODULES: '{bad}' is not a module") as e:
        module_names(["ok", bad], field="WHIMBREL_MODULES")
    assert e.value.field == "WHIMBREL_MODULES"


def test_import_modules_says_who_asked_and_which_module() -> None:
    assert import_modules(["wb_deployed_workflows"], what="x") == [wb_deployed_workflows]
    with pytest.raises(InvalidInput, match="run_worker: cannot import module 'wb_nope'"):
        import_modules(["wb_deployed_workflows", "wb_nope"], what="run_worker")


def test_code_workflows_are_those_defined_in_the_modules() -> None:
    found = code_workflows([wb_deployed_workflows])
    assert [wf.name for wf in found] == ["deployed_order", "deployed_python"]
    assert found[0] is wb_deployed_workflows.deployed_order
    # One imported from another module is that module's, not this one's.
    reexports = types.ModuleType("reexports")
    reexports.chain = wb_code_workflows.chain  # type: ignore[attr-defined]
    assert code_workflows([reexports]) == []
    assert wb_code_workflows.chain in code_workflows([wb_code_workflows, reexports])
