"""``whimbrel pools …``: list, get, set (docs/cli.md, "whimbrel pools")."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from whimbrel.cli.app import Cli, JsonErrorsGroup, app, command
from whimbrel.cli.shapes import iso
from whimbrel.contract.pools import PoolInfo

pools = typer.Typer(help="Named pools: slots and rates shared by activities of any "
                         "workflow.\n\nExample:\n\n"
                         "    whimbrel pools set crawler --slots 4 --per-second 2",
                    no_args_is_help=True, cls=JsonErrorsGroup)
app.add_typer(pools, name="pools")

NameArg = Annotated[str, typer.Argument(help="The pool's name.")]


def _row(info: PoolInfo) -> dict[str, Any]:
    out = info.to_dict()
    out["updated"] = iso(info.updated_epoch)
    return out


def _limits(info: PoolInfo) -> str:
    slots = "unlimited" if info.slots is None else f"{info.slots} slot(s)"
    rate = "" if info.per_second is None else f", {info.per_second:g}/s"
    return slots + rate


@command(pools, "set", example="whimbrel pools set crawler --slots 4 --per-second 2")
def pools_set(
    cli: Cli,
    name: NameArg,
    slots: Annotated[int | None, typer.Option(
        help="At most this many attempts hold a slot at once (0 closes the pool; "
             "leave out: no limit).")] = None,
    per_second: Annotated[float | None, typer.Option(
        help="At most this many starts per second (leave out: no limit).")] = None,
) -> None:
    """Create a pool or change its limits (a limit left out is no limit). Raising a
    limit lets waiting attempts in at once; lowering one lets held slots drain."""
    info = cli.wb.set_pool(name, slots=slots, per_second=per_second)
    cli.emit(_row(info), lambda: cli.out.print(f"pool {info.name}: {_limits(info)}"))


@command(pools, "get", example="whimbrel pools get crawler --json")
def pools_get(cli: Cli, name: NameArg) -> None:
    """A pool's limits, the slots held now and how many attempts (or runs) wait."""
    info = cli.wb.get_pool(name)
    cli.emit(_row(info), lambda: cli.out.print(
        f"pool {info.name}: {_limits(info)}; {info.in_use} in use, {info.waiting} waiting"))


@command(pools, "list", example="whimbrel pools list --json")
def pools_list(cli: Cli) -> None:
    """Every pool and its limits."""
    rows = [_row(i) for i in cli.wb.list_pools()]

    def human() -> None:
        if not rows:
            cli.out.print("no pools (whimbrel pools set NAME --slots N)")
            return
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("POOL", "SLOTS", "PER SECOND", "UPDATED"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["name"], "-" if r["slots"] is None else str(r["slots"]),
                          "-" if r["per_second"] is None else f"{r['per_second']:g}",
                          r["updated"] or "-")
        cli.out.print(table)

    cli.emit(rows, human)
