"""``whimbrel pools …``: list, get, set (docs/cli.md, "whimbrel pools")."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from whimbrel.cli.app import Cli, JsonErrorsGroup, app, command
from whimbrel.cli.shapes import iso
from whimbrel.contract.errors import InvalidInput
from whimbrel.contract.pools import PoolInfo
from whimbrel.engine import PoolNotFound

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


def _limit(text: str | None, field: str, kind: type[int] | type[float],
           current: int | float | None) -> int | float | None:
    """An option's limit: left out, the pool's current one; ``none``, no limit."""
    if text is None:
        return current
    if text.strip().lower() == "none":
        return None
    try:
        return kind(text)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise InvalidInput(f"--{field.replace('_', '-')} must be {what} or none, not "
                           f"{text!r}"[:200], field=field) from None


@command(pools, "set", example="whimbrel pools set crawler --slots 4 --per-second 2")
def pools_set(
    cli: Cli,
    name: NameArg,
    slots: Annotated[str | None, typer.Option(
        metavar="N|none",
        help="At most this many attempts hold a slot at once (0 closes the pool; none: "
             "no limit; leave out: unchanged, and no limit for a new pool).")] = None,
    per_second: Annotated[str | None, typer.Option(
        metavar="R|none",
        help="At most this many starts per second (none: no limit; leave out: "
             "unchanged, and no limit for a new pool).")] = None,
) -> None:
    """Create a pool or change its limits (a limit left out stays as it is; `none`
    lifts it). Raising a limit lets waiting attempts in at once; lowering one admits
    nothing until the slots held are below it."""
    try:
        now: PoolInfo | None = cli.wb.get_pool(name) if None in (slots, per_second) \
            else None
    except PoolNotFound:
        now = None
    new_slots = _limit(slots, "slots", int, now.slots if now else None)
    info = cli.wb.set_pool(name, slots=None if new_slots is None else int(new_slots),
                           per_second=_limit(per_second, "per_second", float,
                                             now.per_second if now else None))
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
