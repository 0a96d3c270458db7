"""The console's operator pages beyond a run (docs/console.md): pools, search by id,
start a run, and a schedule's pause / resume / fire now.

Each is one facade call behind the same guard as the run actions (the token's cookie,
the CSRF field, the console's own origin); a refused or failed call re-shows its form
with what was typed and the reason, so nothing typed is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from whimbrel.contract.errors import InvalidInput, NotFound, WhimbrelError
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.schedules import fire_request_id
from whimbrel.ui import present
from whimbrel.ui.security import CSRF_FIELD

if TYPE_CHECKING:
    from whimbrel.client.whimbrel import Whimbrel
    from whimbrel.ui.security import Guard

#: Pools whose held and waiting counts a view reads (one pool's are a few reads).
MAX_POOLS = 100
#: The schedule verbs: the facade method each calls, and what the page says after.
SCHEDULE_VERBS: dict[str, tuple[str, str]] = {
    "pause": ("pause_schedule", "paused"),
    "resume": ("resume_schedule", "resumed"),
    "fire": ("", "fired"),
}


class Pages(Protocol):
    """What these pages use of the console that holds them (``app.Console``): its client,
    its token checks and its page plumbing. Declared here so this module does not import
    the console, which imports it."""

    wb: Whimbrel
    guard: Guard

    def page(self, request: Request, template: str, status: int = 200,
             **context: Any) -> HTMLResponse: ...
    def error(self, request: Request, status: int, title: str,
              message: str) -> HTMLResponse: ...
    def guarded(self, fn: Callable[[Request], Response]) -> Callable[[Request], Response]: ...
    def names(self) -> list[str]: ...


class Operate:
    """Pools, search, start and schedule actions of one console."""

    def __init__(self, console: Pages) -> None:
        self.c = console

    def routes(self) -> list[Route]:
        g = self.c.guarded
        return [
            Route("/pools", g(self.pools)),
            Route("/search", g(self.search)),
            Route("/start", g(self.start_form), methods=["GET"]),
            Route("/start", self.posted(self.start), methods=["POST"]),
            Route("/schedules/{sid}/{verb}", self.posted(self.schedule_verb),
                  methods=["POST"]),
        ]

    def posted(self, fn: Callable[[Request, dict[str, str]], Response]
               ) -> Callable[[Request], Any]:
        """A POST: refused (403, nothing done) without the token and CSRF field, else
        ``fn`` on a page thread with the form."""
        async def endpoint(request: Request) -> Response:
            form = dict(parse_qsl((await request.body()).decode("utf-8", "replace"),
                                  keep_blank_values=True))
            why = self.c.guard.refusal(request, form.get(CSRF_FIELD))
            if why is not None:
                return self.c.error(request, 403, "Action refused", why)
            return await run_in_threadpool(self.c.guarded(lambda r: fn(r, form)), request)
        return endpoint

    # -- pools -------------------------------------------------------------------------

    def pools(self, request: Request) -> Response:
        """Every pool: slots, held now, waiting, rate (``list_pools``, then ``get_pool``
        of each for its counts)."""
        rows = []
        for info in self.c.wb.list_pools()[:MAX_POOLS]:
            try:
                rows.append(self.c.wb.get_pool(info.name))
            except NotFound:
                continue  # deleted between the two reads
        return self.c.page(request, "pools.html", rows=rows, max_pools=MAX_POOLS)

    # -- search ------------------------------------------------------------------------

    def search(self, request: Request) -> Response:
        """A run id (or an attempt's id: its run, at that activity) opens its run."""
        q = request.query_params.get("q", "").strip()
        if not q:
            raise InvalidInput("type a run id (or an attempt id) to open its run",
                               field="q")
        wx, anchor = q, ""
        if ":" in q:
            try:
                ref = parse_activity_exec_id(q)
            except InvalidInput:
                raise InvalidInput(f"{q[:100]!r} is neither a run id nor an attempt id",
                                   field="q") from None
            wx, anchor = ref.workflow_exec_id, f"#act-{ref.activity_name}"
        try:
            found = self.c.wb.find_workflow(wx)
        except InvalidInput:
            raise InvalidInput(f"{q[:100]!r} is not a run id", field="q") from None
        if found is None:
            return self.c.error(request, 404, "Not found",
                                f"no run {wx} in this table (prefix {self.c.wb.table_prefix})")
        return RedirectResponse(f"/runs/{quote(wx)}{anchor}", status_code=303)

    # -- start a run -------------------------------------------------------------------

    def start_form(self, request: Request) -> Response:
        chosen = request.query_params.get("workflow", "")
        return self._start_page(request, {"workflow": chosen}, "", 200)

    def _start_page(self, request: Request, form: dict[str, str], problem: str,
                    status: int) -> Response:
        return self.c.page(request, "start.html", status, names=self.c.names(),
                           form=form, problem=problem, csrf_field=CSRF_FIELD)

    def start(self, request: Request, form: dict[str, str]) -> Response:
        """``start_workflow(name, input, request_id=, attributes=)``; a bad field
        re-shows the form with everything typed and what to fix."""
        try:
            name = form.get("workflow", "").strip()
            if not name:
                raise InvalidInput("choose the workflow to start", field="workflow")
            wx = self.c.wb.start_workflow(
                name, _json(form.get("input", ""), "input"),
                request_id=form.get("request_id", "").strip() or None,
                source="console",
                attributes=_attributes(form.get("attributes", "")))
        except (InvalidInput, WhimbrelError) as exc:
            return self._start_page(request, form, str(exc), 400)
        return RedirectResponse(f"/runs/{wx}?done=start", status_code=303)

    # -- schedules ---------------------------------------------------------------------

    def schedule_verb(self, request: Request, form: dict[str, str]) -> Response:
        sid, verb = request.path_params["sid"], request.path_params["verb"]
        if verb not in SCHEDULE_VERBS:
            return self.c.error(request, 404, "Not found", f"no schedule action {verb!r}")
        method, done = SCHEDULE_VERBS[verb]
        wb = self.c.wb
        if verb == "fire":
            info = wb.get_schedule(sid)
            s = info.schedule
            # The firing's request id to the second: a double click starts one run.
            wb.start_workflow(s.workflow_name, s.input,
                              request_id=fire_request_id(sid, wb.clock()),
                              source=f"schedule:{sid}", attributes=s.attributes)
        else:
            getattr(wb, method)(sid)
        return RedirectResponse(f"/schedules?done={quote(done)}&schedule={quote(sid)}",
                                status_code=303)


def _json(text: str, field: str) -> Any:
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{field} is not valid JSON: {exc}", field=field) from None


def _attributes(text: str) -> dict[str, str | int] | None:
    """``customer=c-17, region=eu`` (a value of digits is a number)."""
    out: dict[str, str | int] = {}
    for part in (p for p in text.split(",") if p.strip()):
        one = present.attribute_filter(part)
        if one:
            out.update(one)
    return out or None
