"""``whimbrel tables …`` and ``whimbrel definitions …``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from whimbrel.cli.app import VERSION_RANGE, Cli, JsonErrorsGroup, app, command
from whimbrel.cli.shapes import definition_summary, iso
from whimbrel.contract.definitions import WorkflowDefinition
from whimbrel.contract.errors import DefinitionNotFound

tables = typer.Typer(help="Create the DynamoDB tables.\n\nExample:\n\n"
                          "    whimbrel tables create", no_args_is_help=True,
                     cls=JsonErrorsGroup)
definitions = typer.Typer(help="Register and inspect workflow definitions.\n\nExample:\n\n"
                               "    whimbrel definitions register pipeline.yaml",
                          no_args_is_help=True, cls=JsonErrorsGroup)
app.add_typer(tables, name="tables")
app.add_typer(definitions, name="definitions")


@command(tables, "create", example="whimbrel tables create --endpoint-url http://localhost:8000")
def tables_create(cli: Cli) -> None:
    """Create every missing table (idempotent) and wait until they are active."""
    created = cli.wb.create_tables()
    prefix = cli.wb.table_prefix
    cli.emit({"table_prefix": prefix, "created": created}, lambda: cli.out.print(
        f"created {len(created)} table(s): {', '.join(created)}" if created
        else f"all tables with prefix {prefix!r} exist already"))


@command(tables, "migrate", example="whimbrel tables migrate --endpoint-url "
         "http://localhost:8000")
def tables_migrate(
    cli: Cli,
    page_size: Annotated[int, typer.Option(min=1, max=1000,
                                           help="Items per Scan page.")] = 100,
    max_pages: Annotated[int | None, typer.Option(
        min=1, help="Stop after this many pages (resume with --start-key).")] = None,
    start_key: Annotated[str | None, typer.Option(
        help="Resume where a stopped migration printed it would go on (JSON).")] = None,
) -> None:
    """Move runs written before the write-sharded listing keys onto them.

    Idempotent and resumable; the one Scan Whimbrel ever does. Run it once after
    upgrading (docs/deploy.md, "Upgrading"); until then the engine works, but
    `whimbrel list` misses runs created before the upgrade.
    """
    from whimbrel.store.migrate import migrate_index_keys

    resume = json.loads(start_key) if start_key else None
    report = migrate_index_keys(cli.wb.store, page_size=page_size, max_pages=max_pages,
                                start_key=resume)
    out = {"scanned": report.scanned, "rewritten": report.rewritten,
           "changed_meanwhile": report.changed_meanwhile,
           "start_key": json.dumps(report.last_key) if report.last_key else None}

    def human() -> None:
        cli.out.print(f"scanned {report.scanned} run(s), rewrote {report.rewritten}")
        if report.changed_meanwhile:
            cli.out.print(f"{len(report.changed_meanwhile)} run(s) changed meanwhile: "
                          "run `whimbrel tables migrate` again to check them")
        if report.last_key:
            cli.out.print(f"stopped early; go on with --start-key '{out['start_key']}'")
    cli.emit(out, human)


@command(definitions, "register", example="whimbrel definitions register examples/"
         "data_pipeline/pipeline.yaml")
def definitions_register(
    cli: Cli,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="Definition file (.yaml, .yml or .json).")],
) -> None:
    """Validate a definition file and store it as a new version.

    Registering a definition equal to the latest version changes nothing and returns
    that version. Running workflows keep the version they started with.
    """
    defn = WorkflowDefinition.from_file(file)
    version = cli.wb.register_workflow(defn)
    cli.emit(definition_summary(defn, version),
             lambda: cli.out.print(f"registered {defn.name} version {version} "
                                   f"({len(defn.activities)} activities)"))


@command(definitions, "list", example="whimbrel definitions list --json")
def definitions_list(cli: Cli) -> None:
    """List registered workflow definitions with their latest version.

    This reads the (small) definition table in full; it is an operator listing, never
    on the path of a run.
    """
    latest: dict[str, tuple[int, float, str | None, int]] = {}
    for item in cli.wb.list_definitions():
        name, version = item.workflow_name, int(item.version)
        cur = latest.get(name)
        count = (cur[3] if cur else 0) + 1
        if cur is None or version > cur[0]:
            latest[name] = (version, float(item.registered_epoch), item.description, count)
        else:
            latest[name] = (*cur[:3], count)
    rows: list[dict[str, Any]] = [{"workflow_name": n, "latest_version": v, "versions": c,
             "registered_epoch": t, "description": d or ""}
            for n, (v, t, d, c) in sorted(latest.items())]

    def human() -> None:
        if not rows:
            cli.out.print("no definitions registered (whimbrel definitions register FILE)")
            return
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("name", "latest", "versions", "registered (UTC)", "description"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["workflow_name"], str(r["latest_version"]), str(r["versions"]),
                          iso(r["registered_epoch"]) or "", Text(r["description"]))
        cli.out.print(table)

    cli.emit(rows, human)


@command(definitions, "show", example="whimbrel definitions show etl --version 2")
def definitions_show(
    cli: Cli,
    name: Annotated[str, typer.Argument(help="Workflow name.")],
    version: Annotated[int | None, typer.Option(
        help="Version (default: latest).", **VERSION_RANGE)] = None,
) -> None:
    """Show one definition: its activities, dependencies, launchers and retry policies."""
    versions = [v.version for v in cli.wb.list_definitions(name)]
    if not versions:
        raise DefinitionNotFound(name, version)
    ver = version if version is not None else max(versions)
    defn = cli.wb.get_definition(name, ver)
    data = {"workflow_name": name, "version": ver, "versions": sorted(versions),
            "definition": defn.to_dict()}

    def human() -> None:
        cli.out.print(f"[bold]{name}[/] version {ver} (versions: "
                      f"{', '.join(map(str, sorted(versions)))})")
        if defn.description:
            cli.out.print(Text(defn.description, style="dim"))
        table = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("activity", "after", "launcher", "attempts", "heartbeat timeout"):
            table.add_column(col)
        # The DAG's order, as every view of a run shows it (the file's order may differ).
        for act in map(defn.activity, defn.topological_order()):
            cfg = ", ".join(f"{k}={v}" for k, v in act.launcher.config.items())
            table.add_row(act.name, ", ".join(act.depends_on),
                          Text(act.launcher.kind + (f" ({cfg})" if cfg else "")),
                          str(act.retry.max_attempts),
                          f"{act.heartbeat_timeout_seconds:g}s"
                          if act.heartbeat_timeout_seconds else "")
        cli.out.print(table)

    cli.emit(data, human)
