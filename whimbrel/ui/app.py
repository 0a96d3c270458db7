"""The console's web application: Starlette routes over the public ``Whimbrel`` facade,
pages rendered by Jinja2 on the server, refreshed live by htmx (docs/console.md).

Every page reads through the facade's listing and view methods; every action is one
facade call (:mod:`whimbrel.ui.actions`), guarded by the token (:mod:`whimbrel.ui.security`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from whimbrel import ActivityExec, WorkflowExec
from whimbrel.client.whimbrel import Whimbrel
from whimbrel.contract.code.definition import CodeDefinition
from whimbrel.contract.errors import (
    DefinitionNotFound,
    InvalidInput,
    NotFound,
    StoreError,
    WhimbrelError,
)
from whimbrel.contract.ids import parse_activity_exec_id
from whimbrel.contract.states import WorkflowState
from whimbrel.ui import actions, counts, present
from whimbrel.ui.dag import render_svg
from whimbrel.ui.operate import Operate
from whimbrel.ui.security import CSRF_FIELD, Guard, GuardMiddleware

HERE = Path(__file__).parent
SINCE_CHOICES = (("", "Any time"), ("1h", "Last hour"), ("24h", "Last 24 hours"),
                 ("7d", "Last 7 days"), ("30d", "Last 30 days"))
COUNT_CAP = 1000
PAGE_SIZE = 50
#: Seconds a page (or an action) may wait for DynamoDB before the console answers with
#: an error page: a store that hangs must not hold a browser for botocore's minutes of
#: read time-outs and retries.
PAGE_TIMEOUT = 15.0
#: Threads that read for pages; one hung read ties up one of them, not the server.
PAGE_THREADS = 8
#: The longest the runs list waits between two refreshes once nothing changes.
MAX_REFRESH_SECONDS = 60.0


def refresh_delay(base: float, quiet: int) -> float:
    """Seconds before the next refresh of the runs list after ``quiet`` refreshes in a
    row found it unchanged: ``base``, doubled per quiet refresh, at most
    MAX_REFRESH_SECONDS."""
    return float(min(base * 2.0 ** min(quiet, 16), max(base, MAX_REFRESH_SECONDS)))


def _int(text: str | None) -> int:
    return int(text) if text and text.isdigit() and len(text) < 6 else 0


class Console:
    """The pages and actions of one console over one ``Whimbrel`` client.

    Args:
        wb: the client every read and action goes through.
        guard: the token checks.
        refresh_seconds: how often live parts of a page reload.
        page_timeout: seconds a page waits for DynamoDB before it shows an error.
    """

    def __init__(self, wb: Whimbrel, guard: Guard, *, refresh_seconds: float = 2.0,
                 page_size: int = PAGE_SIZE, page_timeout: float = PAGE_TIMEOUT,
                 counts_ttl: float = counts.COUNTS_TTL) -> None:
        self.wb = wb
        self.guard = guard
        self.refresh_seconds = refresh_seconds
        self.page_size = page_size
        self.page_timeout = page_timeout
        self.counts = counts.CountCache(counts_ttl)
        self._pool = ThreadPoolExecutor(PAGE_THREADS, thread_name_prefix="whimbrel-page")
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(present.filters(wb.clock))

    # -- plumbing --------------------------------------------------------------------

    def page(self, request: Request, template: str, status: int = 200,
             **context: Any) -> HTMLResponse:
        ctx = {"request": request, "signed_in": self.guard.signed_in(request),
               "csrf": self.guard.csrf if self.guard.signed_in(request) else "",
               "endpoint": self.wb.endpoint_url or "AWS", "prefix": self.wb.table_prefix,
               "refresh_ms": int(self.refresh_seconds * 1000), "now": self.wb.clock(),
               "W": WorkflowState, **context}
        return HTMLResponse(self.env.get_template(template).render(ctx), status_code=status)

    def error(self, request: Request, status: int, title: str, message: str) -> HTMLResponse:
        return self.page(request, "error.html", status, title=title, message=message)

    def guarded(self, fn: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """Turn the facade's errors into pages a person can act on, and a page that waits
        more than ``page_timeout`` seconds for DynamoDB into a 504 (its read goes on in
        the background, on one of PAGE_THREADS threads)."""
        def endpoint(request: Request) -> Response:
            future = self._pool.submit(fn, request)
            try:
                return future.result(timeout=self.page_timeout)
            except FutureTimeout:
                what = ("The action may still be applied: open the run again to see."
                        if request.method == "POST" else "Try again in a moment.")
                return self.error(request, 504, "DynamoDB did not answer",
                                  f"DynamoDB ({self.wb.endpoint_url or 'AWS'}) did not answer "
                                  f"within {self.page_timeout:g} s. {what}")
            except NotFound as exc:
                return self.error(request, 404, "Not found", str(exc))
            except InvalidInput as exc:
                return self.error(request, 400, "Invalid request", str(exc))
            except StoreError as exc:
                return self.error(request, 503, "DynamoDB error", str(exc))
        return endpoint

    def routes(self) -> list[Route | Mount]:
        g = self.guarded
        return [
            Route("/", lambda r: RedirectResponse("/runs", status_code=307)),
            Route("/healthz", lambda r: PlainTextResponse("ok")),
            Route("/runs", g(self.runs)),
            Route("/runs/live", g(self.runs_live)),
            Route("/runs/counts", g(self.runs_counts)),
            Route("/runs/{wx}", g(self.run)),
            Route("/runs/{wx}/live", g(self.run_live)),
            Route("/runs/{wx}/input.json", g(self.run_input)),
            Route("/runs/{wx}/outputs/{aeid}.json", g(self.attempt_output)),
            Route("/definitions", g(self.definitions)),
            Route("/definitions/{name}", g(self.definition)),
            Route("/rejections", g(self.rejections)),
            Route("/schedules", g(self.schedules)),
            Route("/actions/{action}", g(self.confirm), methods=["GET"]),
            Route("/actions/{action}", self.act, methods=["POST"]),
            *Operate(self).routes(),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]

    # -- runs ------------------------------------------------------------------------

    def _run_filters(self, request: Request) -> dict[str, Any]:
        q = request.query_params
        states = [s.upper() for s in q.getlist("state") if s]
        return {"workflow": q.get("workflow") or None, "states": states,
                "since": q.get("since", ""), "until": q.get("until", ""),
                "attr": q.get("attr", ""), "cursor": q.get("cursor") or None}

    def _runs_context(self, request: Request) -> dict[str, Any]:
        f = self._run_filters(request)
        # Ages ("24h") go as typed: list_workflows counts them from the first page's
        # time, and the counts from now.
        since, until = f["since"] or None, f["until"] or None
        attrs = present.attribute_filter(f["attr"])
        page = self.wb.list_workflows(name=f["workflow"], state=f["states"] or None,
                                      since=since, until=until, limit=self.page_size,
                                      cursor=f["cursor"], attributes=attrs)
        base = [(k, v) for k, v in (("workflow", f["workflow"] or ""), ("since", f["since"]),
                                    ("until", f["until"]), ("attr", f["attr"])) if v]
        states = [("state", s) for s in f["states"]]

        def link(*extra: tuple[str, str]) -> str:
            return "/runs?" + urlencode([*base, *extra])

        live = f["cursor"] is None
        # Back-off: each refresh that finds the page unchanged waits twice as long as
        # the one before (up to MAX_REFRESH_SECONDS); a change resets it. The state
        # rides in the fragment's own URL, so the server keeps none.
        seen = present.page_digest(page.items)
        quiet = _int(request.query_params.get("quiet")) + 1 \
            if request.query_params.get("seen") == seen else 0
        delay = refresh_delay(self.refresh_seconds * 2, quiet)
        query = [*base, *states, *([("cursor", f["cursor"])] if f["cursor"] else [])]
        return {"f": f, "page": page, "state_order": present.STATE_ORDER,
                "query": urlencode(query),
                "live_query": urlencode([*query, ("seen", seen), ("quiet", str(quiet))]),
                "delay_ms": int(delay * 1000),
                "state_link": lambda s: link(("state", s.value)),
                "all_link": link(),
                "next_link": link(*states, ("cursor", page.cursor)) if page.cursor else None,
                "live": live}

    def runs(self, request: Request) -> Response:
        return self.page(request, "runs.html", names=self.names(),
                         since_choices=SINCE_CHOICES, **self._runs_context(request))

    def names(self) -> list[str]:
        """The workflow filter's choices: one Query of the definitions' name index."""
        return sorted(self.wb.store.cold.workflow_names())

    def runs_live(self, request: Request) -> Response:
        return self.page(request, "_runs_live.html", **self._runs_context(request))

    def runs_counts(self, request: Request) -> Response:
        """The counts by state, in their own fragment: read at most once per
        COUNTS_TTL seconds per filter (whimbrel/ui/counts.py)."""
        f = self._run_filters(request)
        attrs = present.attribute_filter(f["attr"])
        key = (f["workflow"], f["since"], f["until"], f["attr"])
        got, at = self.counts.get(key, lambda: counts.read_counts(
            self.wb, workflow=f["workflow"], since=f["since"] or None,
            until=f["until"] or None, attributes=attrs, cap=COUNT_CAP))
        base = [(k, v) for k, v in (("workflow", f["workflow"] or ""), ("since", f["since"]),
                                    ("until", f["until"]), ("attr", f["attr"])) if v]
        total = sum(got.values())
        # A state at the cap, or an attribute listing that stopped at it: "or more".
        capped = any(c >= COUNT_CAP for c in got.values()) or bool(
            attrs and total >= COUNT_CAP)
        return self.page(
            request, "_runs_counts.html", f=f, counts=got, cap=COUNT_CAP,
            total_label=f"{total}+" if capped else str(total),
            state_order=present.STATE_ORDER,
            query=urlencode([*base, *(("state", s) for s in f["states"])]),
            age=max(0.0, self.counts.clock() - at),
            counts_ms=int(max(self.counts.ttl, 2 * self.refresh_seconds) * 1000),
            state_link=lambda s: "/runs?" + urlencode([*base, ("state", s.value)]),
            all_link="/runs?" + urlencode(base))

    def _run_context(self, wx: str) -> dict[str, Any]:
        wf = self.wb.get_workflow(wx)
        try:
            defn = self.wb.get_definition(wf.workflow_name, wf.version)
        except DefinitionNotFound:
            defn = None  # deleted by hand: show the run without its picture
        if isinstance(defn, CodeDefinition):
            defn = None  # a code run: its steps as they ran (their specs are on their rows)
        now = self.wb.clock()
        svg = render_svg(defn, present.node_info(wf, defn, now),
                         title=f"{wf.workflow_name} {wf.state.value}") if defn else ""
        return {"wf": wf, "defn": defn, "svg": svg,
                "attempts": present.attempts(self.wb, wf, defn, now),
                "timeline": present.timeline(wf), "related": present.related(wf),
                "maps": present.map_rows(wf, defn),
                "run_actions": actions.available(self.wb, wf, None, "run"),
                "legend": present.LEGEND, "queued_why": present.queued_why(wf, defn),
                "duration": (wf.ended_epoch or now) - wf.created_epoch}

    def run(self, request: Request) -> Response:
        ctx = self._run_context(request.path_params["wx"])
        said = request.query_params.get("done", "")
        done = actions.BY_NAME.get(said)
        flash = done.done if done else ("Run started." if said == "start" else "")
        return self.page(request, "run.html", flash=flash, **ctx)

    def run_live(self, request: Request) -> Response:
        return self.page(request, "_run_live.html", **self._run_context(
            request.path_params["wx"]))

    def run_input(self, request: Request) -> Response:
        """A run's input whole, as a JSON download (the page shows a preview)."""
        wx = request.path_params["wx"]
        wf = self.wb.find_workflow(wx)
        if wf is None:
            return self.error(request, 404, "Not found", f"no workflow execution {wx}")
        return _download(wf.input, f"{wx}-input.json")

    def attempt_output(self, request: Request) -> Response:
        """An attempt's output whole, as a JSON download."""
        wx, aeid = request.path_params["wx"], request.path_params["aeid"]
        if parse_activity_exec_id(aeid).workflow_exec_id != wx:
            raise InvalidInput(f"{aeid} is not an attempt of run {wx}", field="aeid")
        act = self.wb.get_activity(aeid)
        return _download(act.output, f"{aeid.replace(':', '-')}-output.json")

    # -- definitions and rejections ---------------------------------------------------

    def definitions(self, request: Request) -> Response:
        latest: dict[str, tuple[Any, int]] = {}
        for d in self.wb.list_definitions():  # newest version first per name
            first, count = latest.get(d.workflow_name, (d, 0))
            latest[d.workflow_name] = (first, count + 1)
        return self.page(request, "definitions.html", rows=list(latest.values()))

    def definition(self, request: Request) -> Response:
        name = request.path_params["name"]
        versions = self.wb.list_definitions(name)
        if not versions:
            raise DefinitionNotFound(name)
        raw = request.query_params.get("version")
        if raw is not None and not raw.isdigit():
            raise InvalidInput(f"version {raw!r} is not a number", field="version")
        version = int(raw) if raw else versions[0].version
        chosen = next((v for v in versions if v.version == version), None)
        if chosen is None:
            raise DefinitionNotFound(name, version)
        defn = self.wb.get_definition(name, version)
        svg = render_svg(defn, present.node_info(None, defn, 0.0), title=f"{name} v{version}")
        return self.page(request, "definition.html", defn=defn, version=chosen,
                         versions=versions, svg=svg)

    def rejections(self, request: Request) -> Response:
        day = request.query_params.get("day") or datetime.fromtimestamp(
            self.wb.clock(), UTC).strftime("%Y-%m-%d")
        rows = self.wb.list_rejections(day, limit=200)
        return self.page(request, "rejections.html", day=day, rows=rows)

    def schedules(self, request: Request) -> Response:
        q = request.query_params
        flash = (f"Schedule {q.get('schedule', '')} {q['done']}."
                 if q.get("done") in ("paused", "resumed", "fired") else "")
        return self.page(request, "schedules.html", rows=self.wb.list_schedules(),
                         flash=flash, csrf_field=CSRF_FIELD)

    # -- actions ---------------------------------------------------------------------

    def _target(self, action: actions.Action, target: str
                ) -> tuple[WorkflowExec, ActivityExec | None]:
        if action.target == "run":
            return self.wb.get_workflow(target), None
        wf = self.wb.get_workflow(parse_activity_exec_id(target).workflow_exec_id)
        act = next((a for a in (*wf.activities, *wf.items)
                    if a.activity_exec_id == target), None)
        if act is None:
            self.wb.get_activity(target)  # raises ActivityNotFound
        return wf, act

    def _action(self, request: Request) -> actions.Action:
        action = actions.BY_NAME.get(request.path_params["action"])
        if action is None or not action.offered(self.wb):
            raise _NoSuchAction(request.path_params["action"])
        return action

    def confirm(self, request: Request) -> Response:
        try:
            action = self._action(request)
        except _NoSuchAction as exc:
            return self.error(request, 404, "Not found", str(exc))
        target = request.query_params.get("target", "")
        wf, act = self._target(action, target)
        return self.page(request, "confirm.html", action=action, target=target, wf=wf,
                         act=act, form={"name": actions.signal_hint(wf)}, problem="",
                         possible=action.applies(wf, act), csrf_field=CSRF_FIELD,
                         deciders=self._deciders(action, wf, act))

    def _deciders(self, action: actions.Action, wf: WorkflowExec,
                  act: ActivityExec | None) -> tuple[str, ...] | None:
        """Who may approve or reject ``act`` (empty: anyone), None for other actions."""
        if action.name not in ("approve", "reject") or act is None:
            return None
        try:
            defn = self.wb.get_definition(wf.workflow_name, wf.version)
        except DefinitionNotFound:
            return ()
        return actions.approvers(defn, act)

    async def act(self, request: Request) -> Response:
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace"),
                              keep_blank_values=True))
        why = self.guard.refusal(request, form.get(CSRF_FIELD))
        if why is not None:
            return self.error(request, 403, "Action refused", why)
        return await run_in_threadpool(self.guarded(lambda r: self._perform(r, form)),
                                       request)

    def _perform(self, request: Request, form: dict[str, str]) -> Response:
        try:
            action = self._action(request)
        except _NoSuchAction as exc:
            return self.error(request, 404, "Not found", str(exc))
        target = form.get("target", "")
        wf, act = self._target(action, target)
        problem = ""
        if not action.applies(wf, act):
            problem = (f"Not possible any more: the run is {wf.state.value}"
                       + (f" and the attempt {act.state.value}" if act else "") + ".")
        else:
            try:
                made = action.call(self.wb, target, form)
            except (InvalidInput, WhimbrelError) as exc:
                problem = str(exc)
            else:
                if action.name == "fork" and isinstance(made, str):  # the new run
                    return RedirectResponse(f"/runs/{made}?done=fork", status_code=303)
        if problem:
            return self.page(request, "confirm.html", 409, action=action, target=target,
                             wf=wf, act=act, form=form, problem=problem,
                             possible=action.applies(wf, act), csrf_field=CSRF_FIELD,
                             deciders=self._deciders(action, wf, act))
        return RedirectResponse(f"/runs/{wf.workflow_exec_id}?done={action.name}",
                                status_code=303)


class _NoSuchAction(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(f"no action {name!r} in this console")


def _download(value: Any, filename: str) -> Response:
    return Response(json.dumps(value, ensure_ascii=False), media_type="application/json",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})


def create_app(wb: Whimbrel, *, token: str, open_reads: bool = True,
               allowed_hosts: Iterable[str] | None = ("localhost", "127.0.0.1", "::1"),
               refresh_seconds: float = 2.0, page_size: int = PAGE_SIZE,
               page_timeout: float = PAGE_TIMEOUT,
               counts_ttl: float = counts.COUNTS_TTL) -> Starlette:
    """The console as an ASGI application (serve it with uvicorn, see :func:`serve`).

    Args:
        wb: the client every page and action uses.
        token: the secret actions need (and reads too unless ``open_reads``).
        open_reads: pages are readable without the token (loopback only).
        allowed_hosts: host names the Host header may name; None allows any.
        refresh_seconds: how often live parts reload.
        page_size: runs per page of the runs list.
        page_timeout: seconds a page waits for DynamoDB before it shows an error (504).
        counts_ttl: seconds the runs page's counts by state are kept before they are
            read again (0: every time).
    """
    guard = Guard(token, open_reads=open_reads, allowed_hosts=allowed_hosts)
    console = Console(wb, guard, refresh_seconds=refresh_seconds, page_size=page_size,
                      page_timeout=page_timeout, counts_ttl=counts_ttl)
    return Starlette(routes=console.routes(),
                     middleware=[Middleware(GuardMiddleware, guard=guard)])
