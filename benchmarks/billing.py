"""DynamoDB request units as AWS on-demand bills them, computed independently.

:class:`Meter` is an HTTP proxy in front of DynamoDB Local: point any client at
``meter.url`` and it sees every request and answer, whatever code made them. Per request
it applies AWS's rules to item sizes it measures (attribute name + value bytes; numbers
1 byte per two digits + 1; lists and maps 3 + 1 per element): a write costs
ceil(size / 1 KB) WRU, the larger of the before and after images, and a lost conditional
write ceil(existing item / 1 KB); an index costs 1 WRU when its entry appears, disappears
or has a projected attribute changed, 2 when its key changes; a read ceil(size / 4 KB)
RRU summed over a Query (half when eventually consistent), at least one unit.
Transactions, which Whimbrel does not use, are left at 0 (the cross-check flags them).
Every unit is also charged to the partition-key value it lands on, table and index alike
(``Request.wkeys`` / ``rkeys``, :mod:`benchmarks.keys`): the capacity model of
``bench_scale``. Given a :class:`~benchmarks.throttle.Throttle`, the proxy also enforces
AWS's per-key and per-table limits, scaled down (:mod:`benchmarks.throttle`).
The images come from DynamoDB: ``ReturnValues``, a consistent
GetItem just before each UpdateItem and ``ReturnValuesOnConditionCheckFailure``. The
proxy also asks for ``ReturnConsumedCapacity=INDEXES`` and keeps DynamoDB Local's
figures for the cross-check; what it added is removed before the caller sees the answer.
"""

from __future__ import annotations

import http.client
import json
import math
import re
import threading
import time
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from benchmarks import keys
from benchmarks.throttle import Throttle, answer
from whimbrel.store import specs

WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                    "TransactWriteItems"})
READS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems",
                   "ExecuteStatement"})
_API = "DynamoDB_20120810."
#: The PartiQL SELECT the store sends (store/plumbing.py, select_in): table, index, the
#: partition key and its IN list.
_SELECT_IN = re.compile(r'SELECT .+ FROM "([^"]+)"\."([^"]+)" WHERE "([^"]+)" IN \[([?, ]*)\]')


def _number_size(text: str) -> int:
    return (len(text.lstrip("+-").lower().split("e")[0].replace(".", "").strip("0")) + 1) // 2 + 1


def value_size(value: dict[str, Any]) -> int:
    (kind, raw), = value.items()
    if kind in ("L", "M"):
        pairs = raw.items() if kind == "M" else (("", v) for v in raw)
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in pairs)
    parts = raw if kind in ("SS", "NS", "BS") else [raw]
    return sum(1 if kind in ("BOOL", "NULL") else _number_size(x) if "N" in kind
               else len(x.encode() if isinstance(x, str) else x) for x in parts)


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(k.encode()) + value_size(v) for k, v in (item or {}).items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / 1024))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / 4096))
    return float(units) if consistent else units / 2


def _units() -> defaultdict[str, float]:
    return defaultdict(float)  # table or table.index -> units


@dataclass
class Request:
    """One billed request; times in epoch seconds, the clock of the engine's history."""

    op: str
    t0: float
    t1: float
    ok: bool
    index: str | None
    label: str = ""
    wru: defaultdict[str, float] = field(default_factory=_units)
    rru: defaultdict[str, float] = field(default_factory=_units)
    reported_wru: defaultdict[str, float] = field(default_factory=_units)
    reported_rru: defaultdict[str, float] = field(default_factory=_units)
    items: list[str] = field(default_factory=list)  # "table key" of every item written
    #: units by (table or table.index, partition-key value)
    wkeys: keys.KeyUnits = field(default_factory=dict)
    rkeys: keys.KeyUnits = field(default_factory=dict)

    def charge(self, into: keys.KeyUnits, units: keys.KeyUnits) -> None:
        for k, n in units.items():
            into[k] = into.get(k, 0.0) + n


class Meter:
    """A billing proxy to ``upstream`` for the tables of ``prefix`` (others pass
    through unbilled). Thread-safe. ``throttle``: enforce AWS's limits, scaled down."""

    def __init__(self, upstream: str, prefix: str, throttle: Throttle | None = None) -> None:
        self.specs = {s.table_name(prefix): s for s in specs.TABLES}
        self.throttle = throttle
        up = urlparse(upstream)
        self._up = (up.hostname or "127.0.0.1", up.port or 80)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.requests: list[Request] = []
        self._busy, self._last = 0, time.time()
        meter = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # or headers and body wait for a delayed ACK

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, headers, out = meter._forward(dict(self.headers.items()), body)
                self.send_response(status)
                for k, v in headers:
                    if k.lower() not in ("date", "server", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"  # for the client

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def drain(self) -> list[Request]:
        """The requests billed since the last drain."""
        with self._lock:
            out, self.requests = self.requests, []
            return out

    def settle(self, idle: float = 0.3, timeout: float = 60.0) -> None:
        """Return once no billed request has been in flight for ``idle`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self._busy or time.time() - self._last < idle):
            time.sleep(idle / 3)

    # -- the proxy ---------------------------------------------------------------------

    def _send(self, headers: dict[str, str], body: bytes, retry: bool = True,
              ) -> tuple[int, list[Any], bytes]:
        conn = getattr(self._local, "conn", None) or http.client.HTTPConnection(*self._up)
        self._local.conn = conn
        try:
            conn.request("POST", "/", body, {k: v for k, v in headers.items()
                                              if k.lower() != "content-length"})
            resp = conn.getresponse()
            return resp.status, resp.getheaders(), resp.read()
        except (http.client.HTTPException, OSError):
            conn.close()  # a kept-alive connection may have been closed upstream: once more
            self._local.conn = None
            if retry:
                return self._send(headers, body, False)
            raise

    def _forward(self, headers: dict[str, str], body: bytes) -> tuple[int, list[Any], bytes]:
        t0 = time.time()  # arrival: requests the client overlapped still overlap here
        op = headers.get("X-Amz-Target", "").removeprefix(_API)
        params = json.loads(body) if op in WRITES | READS else {}
        if not params or _table_of(params, next(iter(self.specs))) not in self.specs:
            return self._send(headers, body)  # not billed: streams, table admin, other tables
        added: list[str] = []

        def ask(key: str, value: str, answer: str) -> None:
            if params.get(key, "NONE") == "NONE":
                params[key] = value
                added.append(answer)

        with self._lock:
            self._busy += 1
        asked = params.get("ReturnConsumedCapacity", "NONE")  # INDEXES, whatever was asked
        params["ReturnConsumedCapacity"] = "INDEXES"
        try:
            if op in ("PutItem", "DeleteItem", "UpdateItem"):
                ask("ReturnValues", "ALL_NEW" if op == "UpdateItem" else "ALL_OLD", "Attributes")
            if "ConditionExpression" in params:
                ask("ReturnValuesOnConditionCheckFailure", "ALL_OLD", "Item")
            before, spec = None, self.specs.get(str(params.get("TableName")))
            if op == "UpdateItem" or (self.throttle and op in ("PutItem", "DeleteItem")):
                # its before image, read just before it
                got = self._send({**headers, "X-Amz-Target": _API + "GetItem"}, json.dumps({
                    "TableName": params["TableName"], "Key": params.get("Key") or {
                        k.name: params["Item"][k.name]
                        for k in (spec.hash_key, spec.range_key) if spec and k},
                    "ConsistentRead": True}).encode())
                before = json.loads(got[2]).get("Item") if got[0] < 300 else None
            if refused := self._refused(op, params, before):
                req = Request(op, t0, time.time(), False, params.get("IndexName"),
                              label=f"{op} {self._name(params['TableName'])} throttled")
                with self._lock:
                    self.requests.append(req)
                return answer(*refused)
            status, rheaders, out = self._send(headers, json.dumps(params).encode())
        finally:
            with self._lock:
                t1 = self._last = time.time()
                self._busy -= 1
        got = json.loads(out or b"{}")
        req = Request(op, t0, t1, status < 300, _index_of(params), label=op)
        self._bill(req, params, got, before)
        self._reported(req, got.get("ConsumedCapacity"))
        if self.throttle:
            self.throttle.draw("w", req.wkeys)
            self.throttle.draw("r", req.rkeys)
        with self._lock:
            self.requests.append(req)
        for key in added + ["ConsumedCapacity"] * (asked == "NONE"):
            got.pop(key, None)
        for c in _entries(got.get("ConsumedCapacity")) if asked == "TOTAL" else []:
            c.pop("Table", None)  # the caller asked for totals: the detail was ours
            c.pop("GlobalSecondaryIndexes", None)
        out = json.dumps(got).encode()
        rheaders = [(k, str(zlib.crc32(out)) if k.lower() == "x-amz-crc32" else v)
                    for k, v in rheaders]
        return status, rheaders, out

    def _refused(self, op: str, params: dict[str, Any],
                 before: dict[str, Any] | None) -> tuple[str, str] | None:
        """The throttling mode's refusal of a request, from the keys it would touch."""
        if not self.throttle:
            return None
        if op == "BatchWriteItem":
            return self.throttle.refuse("w", [
                k for tbl, reqs in params["RequestItems"].items() for r in reqs
                for k in keys.write_keys(self.specs[tbl], r.get("DeleteRequest", {}).get(
                    "Key"), r.get("PutRequest", {}).get("Item"), 1)[0]])
        spec = self.specs.get(str(params.get("TableName")))
        if spec is None:  # BatchGetItem: not limited
            return None
        if op in ("PutItem", "DeleteItem", "UpdateItem"):
            after = keys.predicted_after(op, params, before)
            return self.throttle.refuse("w", list(keys.write_keys(spec, before, after, 1)[0]))
        if op == "GetItem":
            return self.throttle.refuse("r", [(spec.logical_name, keys.scalar(
                params["Key"].get(spec.hash_key.name)))])
        if op == "Query":
            return self.throttle.refuse("r", [keys.query_key(spec, params)])
        return None

    # -- the rules ---------------------------------------------------------------------

    def _name(self, table: str) -> str:
        return self.specs[table].logical_name if table in self.specs else table

    def _key(self, table: str, item: dict[str, Any]) -> str:
        spec = self.specs[table]  # the range key alone, when there is one (shorter)
        key = spec.range_key if spec.range_key and spec.range_key.name in item else spec.hash_key
        return str(next(iter(item.get(key.name, {"S": "?"}).values())))

    def _write(self, req: Request, table: str, before: dict[str, Any] | None,
               after: dict[str, Any] | None) -> None:
        name = self._name(table)
        units = float(write_units(max(item_size(before), item_size(after))))
        req.wru[name] += units
        req.items.append(f"{name} {self._key(table, after or before or {})}")
        by_key, _ = keys.write_keys(self.specs[table], before, after, units)
        req.charge(req.wkeys, by_key)
        for (cat, _key), n in by_key.items():
            if cat != name:
                req.wru[cat] += n

    def _bill(self, req: Request, params: dict[str, Any], answer: dict[str, Any],
              before: dict[str, Any] | None) -> None:
        op, table = req.op, str(params.get("TableName", ""))
        name = self._name(table)
        if op in ("PutItem", "DeleteItem", "UpdateItem") and not req.ok:
            old = answer.get("Item")  # a lost condition still bills the existing item
            lost = "Condition" in str(answer.get("__type"))
            req.wru[name] = float(write_units(item_size(old))) if lost else 0.0
            req.items.append(f"{name} {self._key(table, params.get('Item') or params['Key'])}")
            spec = self.specs[table]
            if lost:
                req.charge(req.wkeys, {(name, keys.scalar((params.get("Item") or params[
                    "Key"]).get(spec.hash_key.name))): req.wru[name]})
            req.label = f"{op} {name} (condition failed" + (
                f", item {st})" if (st := _state(old)) else ")")
        elif op in ("PutItem", "DeleteItem", "UpdateItem"):
            if op != "UpdateItem":
                before = answer.get("Attributes")
            after = params.get("Item") if op == "PutItem" else None if op == "DeleteItem" \
                else answer.get("Attributes") if params["ReturnValues"] == "ALL_NEW" \
                else {**(before or {}), **answer.get("Attributes", {})}  # caller's choice
            self._write(req, table, before, after)
            b, a = _state(before), _state(after)
            req.label = f"{op} {name}" + (f" {b}→{a}" if a and b and a != b else
                                          f" (create {a})" if a and not b else "")
        elif op == "BatchWriteItem":  # puts of new items, deletes sized by their keys
            for tbl, reqs in params["RequestItems"].items():
                for r in reqs if req.ok else ():
                    put = r.get("PutRequest", {}).get("Item")
                    self._write(req, tbl, None if put else r["DeleteRequest"]["Key"], put)
            req.label = f"{op} {','.join(sorted({i.split(' ')[0] for i in req.items}))}"
        elif op in ("GetItem", "Query", "Scan"):
            index, consistent = params.get("IndexName"), bool(params.get("ConsistentRead"))
            cat = f"{name}.{index}" if index else name
            items = [answer.get("Item")] if op == "GetItem" else answer.get("Items", [])
            req.rru[cat] = read_units(sum(map(item_size, items)), consistent) if req.ok else 0
            spec = self.specs[table]
            where = keys.query_key(spec, params) if op == "Query" else (cat, "(scan)") \
                if op == "Scan" else (cat, keys.scalar(params["Key"].get(spec.hash_key.name)))
            req.charge(req.rkeys, {where: req.rru[cat]})
            req.label = f"{op} {cat}{' consistent' if consistent else ''}" + (
                "" if op == "GetItem" else f" ({len(items)} item{'s' * (len(items) != 1)})")
        elif op == "ExecuteStatement" and (m := _SELECT_IN.match(params["Statement"])):
            # Billed as a Query of each key it names (at least 0.5 RRU each, eventually
            # consistent): AWS documents no cheaper rule for IN.
            name, index, n = self._name(m.group(1)), m.group(2), m.group(4).count("?")
            cat, items = f"{name}.{index}", answer.get("Items", [])
            units = max(read_units(sum(map(item_size, items)), False), 0.5 * n)
            req.rru[cat] = units if req.ok else 0
            req.charge(req.rkeys, {(cat, keys.scalar(v)): req.rru[cat] / n
                                   for v in params["Parameters"][:n]})
            req.label = f"{op} {cat} IN {n} keys ({len(items)} item{'s' * (len(items) != 1)})"
        elif op == "BatchGetItem":
            for tbl, items in answer.get("Responses", {}).items():
                consistent = bool(params["RequestItems"][tbl].get("ConsistentRead"))
                req.rru[self._name(tbl)] = sum(read_units(item_size(i), consistent)
                                               for i in items)
                spec = self.specs[tbl]
                for i in items:
                    req.charge(req.rkeys, {(spec.logical_name, keys.scalar(i.get(
                        spec.hash_key.name))): read_units(item_size(i), consistent)})

    def _reported(self, req: Request, consumed: Any) -> None:
        into = req.reported_rru if req.op in READS else req.reported_wru
        for entry in _entries(consumed):
            name, gsi = self._name(str(entry["TableName"])), entry.get("GlobalSecondaryIndexes")
            table = (entry.get("Table") or {} if gsi else entry).get("CapacityUnits")
            for cat, units in [(name, table), *((f"{name}.{k}", v.get("CapacityUnits"))
                                                for k, v in (gsi or {}).items())]:
                into[cat] += float(units or 0)


def _state(item: dict[str, Any] | None) -> str | None:
    return (item or {}).get("state", {}).get("S")


def _entries(consumed: Any) -> list[dict[str, Any]]:
    return consumed if isinstance(consumed, list) else [consumed] if consumed else []


def summarize(requests: list[Request]) -> dict[str, Any]:
    """Totals of a list of requests (JSON-able)."""
    kinds = ("wru", "rru", "reported_wru", "reported_rru")
    out: dict[str, Any] = {k: defaultdict(float) for k in kinds}
    labels: dict[str, dict[str, float]] = {}
    writes: Counter[str] = Counter()
    attempts: Counter[str] = Counter()
    for r in requests:
        row = labels.setdefault(r.label, dict.fromkeys(("calls", *kinds), 0.0))
        row["calls"] += 1
        for kind in kinds:
            for cat, units in getattr(r, kind).items():
                out[kind][cat] += units
                row[kind] += units
        attempts.update(r.items)
        writes.update(r.items if r.ok else [])
    per_table: dict[str, int] = defaultdict(int)
    for item, n in writes.items():
        per_table[item.split(" ")[0]] = max(per_table[item.split(" ")[0]], n)
    top = writes.most_common(1) or [("", 0)]
    return {**{k: dict(v) for k, v in out.items()}, **{f"{k}_total": sum(out[k].values())
                                                         for k in kinds},
            "requests": len(requests), "labels": labels,
            "failed_writes": sum(1 for r in requests if not r.ok and r.op in WRITES),
            "max_item": top[0][0], "max_item_writes": top[0][1],
            "max_item_attempts": max(attempts.values(), default=0),
            "max_item_writes_by_table": dict(per_table),
            "writes_per_item": {str(k): v for k, v in sorted(Counter(writes.values()).items())}}


def _table_of(params: dict[str, Any], default: str) -> str:
    """The table a request names: ``TableName``, or a PartiQL SELECT's ``FROM``."""
    if "Statement" in params:
        m = _SELECT_IN.match(str(params["Statement"]))
        return m.group(1) if m else ""
    return str(params.get("TableName", default))


def _index_of(params: dict[str, Any]) -> str | None:
    """The index a request reads: ``IndexName``, or a PartiQL SELECT's ``FROM "t"."i"``."""
    if "Statement" in params:
        m = _SELECT_IN.match(str(params["Statement"]))
        return m.group(2) if m else None
    index = params.get("IndexName")
    return str(index) if index else None
