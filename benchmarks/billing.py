"""DynamoDB request units as AWS on-demand would bill them, computed independently.

:class:`Billing` hooks the botocore clients it is attached to (the PynamoDB connections
of a :class:`~whimbrel.store.store.Store`, and any raw boto3 client) through botocore's
event system, so it sees every request and response without touching Whimbrel's code.
For each call it computes the units from AWS's published rules, using item sizes it
measures itself:

* item size = sum over attributes of (name bytes + value bytes): strings UTF-8 bytes,
  numbers 1 byte per two significant digits + 1, booleans/null 1, lists/maps 3 bytes
  + 1 byte per element + the elements (AWS "DynamoDB item sizes and formats");
* a write costs ceil(size / 1 KB) WRU (at least 1), where the size of an update or an
  overwrite is the larger of the before and after images, and a delete the size of the
  deleted item; a write whose condition fails still costs ceil(existing item / 1 KB)
  (at least 1) and touches no index;
* a global secondary index (ours are all KEYS_ONLY) costs 1 WRU when its entry appears
  or disappears and 2 (delete + put) when its key changes; a write that leaves the
  index key attributes alone costs nothing there;
* a strongly consistent read costs ceil(size / 4 KB) RRU, an eventually consistent one
  half; a Query or Scan sums the sizes of the items it reads, then rounds up (at least
  one unit even when it returns nothing); BatchGetItem rounds each item;
* transactional operations cost twice (table items; index writes once — assumption).

To know before/after images it asks DynamoDB for them where that does not change what
the caller sees: ``ReturnValues=ALL_OLD`` on PutItem/DeleteItem and ``ALL_NEW`` on
UpdateItem when the caller asked for none, and ``ReturnValuesOnConditionCheckFailure``
on conditional writes; whatever it added is removed from the response before the caller
sees it. The before image of an UpdateItem comes from a shadow copy of every item it has
seen written or read; the shadow is consulted only when the update expression names an
index key attribute, so a stale shadow can only mis-size an index write, never invent
one. It also asks for ``ReturnConsumedCapacity=INDEXES`` and keeps what DynamoDB Local
reports, per table and per index, for the cross-check.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from whimbrel.store import specs

KB = 1024
READ_UNIT = 4 * KB

_WRITE_OPS = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem",
                        "TransactWriteItems"})
_READ_OPS = frozenset({"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"})
_CTX_KEY = "whimbrel_benchmark_billing"
_NAME_TOKEN = re.compile(r"#\w+|(?<![:#\w.])[A-Za-z_]\w*")
_SEP = os.sep
_CALLER_ROOTS = (f"{_SEP}whimbrel{_SEP}", f"{_SEP}lambdas{_SEP}", f"{_SEP}benchmarks{_SEP}")
_CALLER_SKIP = (f"{_SEP}whimbrel{_SEP}store{_SEP}", f"{_SEP}benchmarks{_SEP}billing.py",
                f"{_SEP}whimbrel{_SEP}testing.py")
_UPDATE_KEYWORDS = frozenset({"SET", "REMOVE", "ADD", "DELETE", "list_append",
                              "if_not_exists", "set", "remove", "add", "delete"})


def caller(depth: int = 3) -> str:
    """The nearest ``depth`` Whimbrel (or Lambda handler, or benchmark) frames above the
    store layer, innermost first: who made the request, and on whose behalf."""
    frames: list[str] = []
    store: list[str] = []
    frame = sys._getframe(1)
    while frame is not None and len(frames) < depth:
        path = frame.f_code.co_filename
        for root in _CALLER_ROOTS:
            if root in path and not path.endswith(_CALLER_SKIP[1:]):
                rel = (root.strip(_SEP) + "/" + path.split(root, 1)[1]).replace(_SEP, "/")
                where = f"{rel if not frames else rel.rsplit('/', 1)[-1]}:{frame.f_code.co_name}"
                if _CALLER_SKIP[0] in path:
                    store.append(where)
                elif not frames or frames[-1] != where:
                    frames.append(where)
                break
        frame = frame.f_back  # type: ignore[assignment]
    return " ← ".join(frames or store[:1] or ["?"])


# -- item sizes --------------------------------------------------------------------------


def _number_size(text: str) -> int:
    digits = text.lstrip("+-").replace(".", "")
    if "e" in digits.lower():
        mantissa = digits.lower().split("e", 1)[0]
        digits = mantissa
    digits = digits.strip("0")
    return (len(digits) + 1) // 2 + 1


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one typed attribute value (without its name)."""
    (kind, raw), = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw).encode())
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "L":
        return 3 + sum(value_size(v) + 1 for v in raw)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(v) + 1 for k, v in raw.items())
    if kind == "SS":
        return sum(len(s.encode()) for s in raw)
    if kind == "NS":
        return sum(_number_size(str(n)) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Mapping[str, Any] | None) -> int:
    """Bytes of an item in DynamoDB's wire format (0 for None)."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / KB))


def read_units(size: int, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT))
    return float(units) if consistent else units / 2.0


# -- schema ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableInfo:
    logical: str
    keys: tuple[str, ...]
    #: GSI name -> its key attribute names (hash, range)
    indexes: Mapping[str, tuple[str, ...]]


def schema_for(prefix: str) -> dict[str, TableInfo]:
    """Physical table name -> keys and indexes, from Whimbrel's table specs."""
    out: dict[str, TableInfo] = {}
    for spec in specs.TABLES:
        keys = tuple(k.name for k in (spec.hash_key, spec.range_key) if k)
        idx = {i.name: tuple(k.name for k in (i.hash_key, i.range_key) if k)
               for i in spec.indexes}
        out[spec.table_name(prefix)] = TableInfo(spec.logical_name, keys, idx)
    return out


def _plain(value: Mapping[str, Any]) -> str:
    (kind, raw), = value.items()
    if kind == "N":
        return str(Decimal(str(raw)).normalize())
    return str(raw)


# -- what one request cost -----------------------------------------------------------------


@dataclass
class Charge:
    op: str
    label: str
    ok: bool = True
    #: category ("table" or "table.index") -> units, computed here
    wru: dict[str, float] = field(default_factory=dict)
    rru: dict[str, float] = field(default_factory=dict)
    #: the same, as DynamoDB (Local) reported them
    reported_wru: dict[str, float] = field(default_factory=dict)
    reported_rru: dict[str, float] = field(default_factory=dict)
    #: (logical table, item key) of every item this request wrote (or tried to)
    items: list[tuple[str, str]] = field(default_factory=list)
    #: who asked (see :func:`caller`)
    caller: str = "?"
    #: monotonic clock when the request was built and when its response came back
    t0: float = 0.0
    t1: float = 0.0


def _add(into: dict[str, float], key: str, units: float) -> None:
    into[key] = into.get(key, 0.0) + units


class Billing:
    """Counts every DynamoDB request made through the clients it is attached to.

    Thread-safe. ``reset()`` starts a new measurement (the shadow of item images is
    kept); ``summary()`` returns JSON-able totals.
    """

    def __init__(self, table_prefix: str) -> None:
        self.schema = schema_for(table_prefix)
        self._lock = threading.Lock()
        self._charges: list[Charge] = []
        self._shadow: dict[tuple[str, str], dict[str, Any] | None] = {}
        self._attached: list[Any] = []
        self._uid = f"whimbrel-bench-billing-{id(self)}"
        self.unknown_before = 0
        self.last_call = time.monotonic()
        self._inflight = 0
        #: logical table -> largest item image seen written (bytes)
        self.max_item_size: dict[str, int] = {}

    # -- attaching ---------------------------------------------------------------------

    def attach(self, client: Any) -> Any:
        """Hook a botocore/boto3 DynamoDB client; returns it."""
        events = client.meta.events
        events.register("before-parameter-build.dynamodb", self._before,
                        unique_id=self._uid + "-before")
        events.register("after-call.dynamodb", self._after, unique_id=self._uid + "-after")
        self._attached.append(client)
        return client

    def attach_store(self, store: Any) -> None:
        """Hook every PynamoDB connection of a Whimbrel ``Store``."""
        seen: set[int] = set()
        for model in store.models.all():
            client = model._get_connection().connection.client
            if id(client) not in seen:
                seen.add(id(client))
                self.attach(client)

    def detach(self) -> None:
        for client in self._attached:
            events = client.meta.events
            events.unregister("before-parameter-build.dynamodb", self._before,
                              unique_id=self._uid + "-before")
            events.unregister("after-call.dynamodb", self._after,
                              unique_id=self._uid + "-after")
        self._attached.clear()

    def reset(self) -> None:
        with self._lock:
            self._charges.clear()
            self.unknown_before = 0
            self.max_item_size = {}

    def wait_quiet(self, quiet: float = 0.3, timeout: float = 30.0) -> None:
        """Return once no request has been in flight or finished for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = self._inflight == 0 and time.monotonic() - self.last_call >= quiet
            if idle:
                return
            time.sleep(quiet / 3)

    # -- hooks ---------------------------------------------------------------------------

    def _before(self, params: dict[str, Any], model: Any, context: dict[str, Any],
                **_: Any) -> None:
        op = model.name
        if op not in _WRITE_OPS and op not in _READ_OPS:
            return
        params["ReturnConsumedCapacity"] = "INDEXES"
        strip: list[str] = []
        if op in ("PutItem", "DeleteItem") and params.get("ReturnValues", "NONE") == "NONE":
            params["ReturnValues"] = "ALL_OLD"
            strip.append("Attributes")
        if op == "UpdateItem" and params.get("ReturnValues", "NONE") == "NONE":
            params["ReturnValues"] = "ALL_NEW"
            strip.append("Attributes")
        if (op in ("PutItem", "DeleteItem", "UpdateItem") and "ConditionExpression" in params
                and "ReturnValuesOnConditionCheckFailure" not in params):
            params["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
            strip.append("Item")
        context[_CTX_KEY] = (op, params, strip, caller(), time.monotonic())
        with self._lock:
            self._inflight += 1
            self.last_call = time.monotonic()

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any,
               context: dict[str, Any], **_: Any) -> None:
        info = context.pop(_CTX_KEY, None)
        if info is None:
            return
        op, params, strip, who, t0 = info
        t1 = time.monotonic()
        ok = getattr(http_response, "status_code", 200) < 300
        try:
            with self._lock:
                charges = self._charge(op, params, parsed, ok)
                reported = parsed.get("ConsumedCapacity")
                if charges:
                    self._attach_reported(charges[0], op, reported)
                    charges[0].caller = who
                    charges[0].t0, charges[0].t1 = t0, t1
                self._charges.extend(charges)
        finally:
            for key in strip:
                parsed.pop(key, None)
            with self._lock:
                self._inflight -= 1
                self.last_call = time.monotonic()

    # -- the billing rules ---------------------------------------------------------------

    def _key(self, table: str, item: Mapping[str, Any]) -> str:
        info = self.schema.get(table)
        names = info.keys if info else tuple(sorted(item))
        return "|".join(_plain(item[k]) for k in names if k in item)

    def _logical(self, table: str) -> str:
        info = self.schema.get(table)
        return info.logical if info else table

    def _index_key(self, item: Mapping[str, Any] | None,
                   keys: tuple[str, ...]) -> tuple[str, ...] | None:
        if not item or any(k not in item for k in keys):
            return None
        return tuple(_plain(item[k]) for k in keys)

    def _label(self, table: str, op: str, before: Mapping[str, Any] | None,
               after: Mapping[str, Any] | None, ok: bool, touched: Iterable[str] = ()) -> str:
        logical = self._logical(table)
        if not ok:
            state = (before or {}).get("state", {}).get("S")
            return f"{logical} {op} (condition failed{', item ' + state if state else ''})"
        b = (before or {}).get("state", {}).get("S") if before else None
        a = (after or {}).get("state", {}).get("S") if after else None
        if op == "PutItem":
            return f"{logical} PutItem" + (f" (create {a})" if a else "")
        if op == "DeleteItem":
            return f"{logical} DeleteItem"
        if a and b and a != b:
            return f"{logical} UpdateItem {b}→{a}"
        if a and b is None and "state" in set(touched):
            return f"{logical} UpdateItem →{a}"
        names = sorted(n for n in touched if n not in ("updated_epoch",))
        return f"{logical} UpdateItem (set {', '.join(names) or '?'})"

    def _write(self, charge: Charge, table: str, before: Mapping[str, Any] | None,
               after: Mapping[str, Any] | None, *, ok: bool, factor: float = 1.0,
               index_keys_touched: bool = True) -> None:
        info = self.schema.get(table)
        logical = self._logical(table)
        if not ok:
            _add(charge.wru, logical, factor * write_units(item_size(before)))
            return
        size = max(item_size(before), item_size(after))
        _add(charge.wru, logical, factor * write_units(size))
        if after:
            self.max_item_size[logical] = max(self.max_item_size.get(logical, 0),
                                              item_size(after))
        if info is None or not index_keys_touched:
            return
        for name, keys in info.indexes.items():
            kb, ka = self._index_key(before, keys), self._index_key(after, keys)
            if kb is None and ka is None:
                continue
            if kb is None or ka is None:
                units = 1.0
            elif kb != ka:
                units = 2.0
            else:
                continue
            _add(charge.wru, f"{logical}.{name}", units)

    def _touched(self, params: Mapping[str, Any]) -> set[str]:
        expr = str(params.get("UpdateExpression") or "")
        names = params.get("ExpressionAttributeNames") or {}
        out: set[str] = set()
        for tok in _NAME_TOKEN.findall(expr):
            if tok.startswith("#"):
                out.add(str(names.get(tok, tok)))
            elif tok not in _UPDATE_KEYWORDS:
                out.add(tok)
        for name in params.get("AttributeUpdates") or {}:
            out.add(name)
        return out

    def _charge(self, op: str, params: Mapping[str, Any], parsed: Mapping[str, Any],
                ok: bool) -> list[Charge]:
        if op == "PutItem":
            return [self._single_write(op, params, parsed, ok)]
        if op == "UpdateItem":
            return [self._single_write(op, params, parsed, ok)]
        if op == "DeleteItem":
            return [self._single_write(op, params, parsed, ok)]
        if op == "BatchWriteItem":
            return [self._batch_write(params, parsed, ok)]
        if op == "TransactWriteItems":
            return [self._transact_write(params, ok)]
        if op in ("GetItem", "Query", "Scan"):
            return [self._read(op, params, parsed, ok)]
        if op in ("BatchGetItem", "TransactGetItems"):
            return [self._multi_read(op, params, parsed, ok)]
        return []

    def _single_write(self, op: str, params: Mapping[str, Any], parsed: Mapping[str, Any],
                      ok: bool) -> Charge:
        table = str(params["TableName"])
        key_src = params.get("Item") if op == "PutItem" else params.get("Key")
        key = self._key(table, key_src or {})
        skey = (table, key)
        charge = Charge(op, "", ok, items=[(self._logical(table), key)])
        if not ok:
            existing = parsed.get("Item")
            if existing is None and skey in self._shadow:
                existing = self._shadow[skey]
            charge.label = self._label(table, op, existing, None, False)
            self._write(charge, table, existing, None, ok=False)
            if existing is not None:
                self._shadow[skey] = dict(existing)
            return charge
        touched: set[str] = set()
        index_keys_touched = True
        if op == "PutItem":
            after: dict[str, Any] | None = dict(params["Item"])
            before = parsed.get("Attributes") if params.get("ReturnValues") == "ALL_OLD" \
                else self._shadow.get(skey)
        elif op == "DeleteItem":
            after = None
            before = parsed.get("Attributes") if params.get("ReturnValues") == "ALL_OLD" \
                else self._shadow.get(skey)
        else:
            touched = self._touched(params)
            rv = params.get("ReturnValues")
            info = self.schema.get(table)
            index_names = {k for keys in (info.indexes.values() if info else ()) for k in keys}
            index_keys_touched = bool(touched & index_names)
            if skey in self._shadow:
                before = self._shadow[skey]
            else:
                before = None
                self.unknown_before += 1
            if rv == "ALL_NEW":
                after = dict(parsed.get("Attributes") or {})
            elif rv == "ALL_OLD":
                before = parsed.get("Attributes")
                after = dict(before or {})
            else:  # UPDATED_*: approximate with the shadow
                after = dict(before or {})
                after.update(parsed.get("Attributes") or {})
            if before is None and skey not in self._shadow:
                before = after  # unknown: size it like the after image
        charge.label = self._label(table, op, before, after, True, touched)
        self._write(charge, table, before, after, ok=True,
                    index_keys_touched=index_keys_touched)
        self._shadow[skey] = after
        return charge

    def _batch_write(self, params: Mapping[str, Any], parsed: Mapping[str, Any],
                     ok: bool) -> Charge:
        charge = Charge("BatchWriteItem", "", ok)
        unprocessed = parsed.get("UnprocessedItems") or {}
        tables = []
        for table, requests in (params.get("RequestItems") or {}).items():
            tables.append(self._logical(table))
            skipped = unprocessed.get(table) or []
            for req in requests:
                if not ok or req in skipped:
                    continue
                if "PutRequest" in req:
                    item = dict(req["PutRequest"]["Item"])
                    skey = (table, self._key(table, item))
                    self._write(charge, table, self._shadow.get(skey), item, ok=True)
                    self._shadow[skey] = item
                else:
                    k = req["DeleteRequest"]["Key"]
                    skey = (table, self._key(table, k))
                    self._write(charge, table, self._shadow.get(skey), None, ok=True)
                    self._shadow[skey] = None
                charge.items.append((self._logical(table), skey[1]))
        charge.label = f"{', '.join(sorted(set(tables)))} BatchWriteItem"
        return charge

    def _transact_write(self, params: Mapping[str, Any], ok: bool) -> Charge:
        charge = Charge("TransactWriteItems", "", ok)
        tables = []
        for entry in params.get("TransactItems") or []:
            (kind, body), = entry.items()
            table = str(body["TableName"])
            tables.append(self._logical(table))
            src = body.get("Item") if kind == "Put" else body.get("Key")
            skey = (table, self._key(table, src or {}))
            before = self._shadow.get(skey)
            charge.items.append((self._logical(table), skey[1]))
            if kind == "ConditionCheck" or not ok:
                _add(charge.wru, self._logical(table), 2.0 * write_units(item_size(before)))
                continue
            if kind == "Put":
                after: dict[str, Any] | None = dict(body["Item"])
            elif kind == "Delete":
                after = None
            else:
                after = None  # unknown without evaluating the expression
                self.unknown_before += 1
                after = dict(before or {})
            size = max(item_size(before), item_size(after))
            _add(charge.wru, self._logical(table), 2.0 * write_units(size))
            tmp = Charge("", "")
            self._write(tmp, table, before, after, ok=True)
            for cat, units in tmp.wru.items():
                if "." in cat:
                    _add(charge.wru, cat, units)
            if kind != "Update":
                self._shadow[skey] = after
        charge.label = f"{', '.join(sorted(set(tables)))} TransactWriteItems"
        return charge

    def _read(self, op: str, params: Mapping[str, Any], parsed: Mapping[str, Any],
              ok: bool) -> Charge:
        table = str(params["TableName"])
        logical = self._logical(table)
        index = params.get("IndexName")
        consistent = bool(params.get("ConsistentRead")) and not index
        projected = "ProjectionExpression" in params or "AttributesToGet" in params
        cat = f"{logical}.{index}" if index else logical
        charge = Charge(op, f"{cat} {op}{' consistent' if consistent else ''}", ok)
        if not ok:
            return charge
        if op == "GetItem":
            item = parsed.get("Item")
            skey = (table, self._key(table, params.get("Key") or {}))
            size = item_size(item)
            if projected and skey in self._shadow:
                size = item_size(self._shadow[skey])
            elif not projected:
                self._shadow[skey] = dict(item) if item else None
            _add(charge.rru, cat, read_units(size, consistent))
            return charge
        total = 0
        for item in parsed.get("Items") or []:
            skey = (table, self._key(table, item))
            if projected and not index and skey in self._shadow:
                total += item_size(self._shadow[skey])
            else:
                total += item_size(item)
            if not projected and not index:
                self._shadow[skey] = dict(item)
        _add(charge.rru, cat, read_units(total, consistent))
        return charge

    def _multi_read(self, op: str, params: Mapping[str, Any], parsed: Mapping[str, Any],
                    ok: bool) -> Charge:
        charge = Charge(op, op, ok)
        if not ok:
            return charge
        if op == "BatchGetItem":
            tables = []
            for table, body in (parsed.get("Responses") or {}).items():
                req = (params.get("RequestItems") or {}).get(table) or {}
                consistent = bool(req.get("ConsistentRead"))
                tables.append(self._logical(table))
                for item in body:
                    _add(charge.rru, self._logical(table),
                         read_units(item_size(item), consistent))
            charge.label = f"{', '.join(sorted(tables))} BatchGetItem"
        else:
            for resp in parsed.get("Responses") or []:
                _add(charge.rru, "transact", 2.0 * read_units(item_size(resp.get("Item")), True))
        return charge

    def _attach_reported(self, charge: Charge, op: str, reported: Any) -> None:
        entries = reported if isinstance(reported, list) else [reported] if reported else []
        target = charge.reported_rru if op in _READ_OPS else charge.reported_wru
        for entry in entries:
            logical = self._logical(str(entry.get("TableName", "?")))
            table = entry.get("Table") or {}
            units = table.get("CapacityUnits")
            if units is None and not entry.get("GlobalSecondaryIndexes"):
                units = entry.get("CapacityUnits")
            if units:
                _add(target, logical, float(units))
            for name, body in (entry.get("GlobalSecondaryIndexes") or {}).items():
                if body.get("CapacityUnits"):
                    _add(target, f"{logical}.{name}", float(body["CapacityUnits"]))

    # -- results -------------------------------------------------------------------------

    def charges(self) -> list[Charge]:
        with self._lock:
            return list(self._charges)

    def summary(self) -> dict[str, Any]:
        """Totals of the current measurement (JSON-able)."""
        charges = self.charges()
        wru: dict[str, float] = defaultdict(float)
        rru: dict[str, float] = defaultdict(float)
        rep_wru: dict[str, float] = defaultdict(float)
        rep_rru: dict[str, float] = defaultdict(float)
        calls: Counter[str] = Counter()
        by_label: dict[str, dict[str, float]] = {}
        item_ok: Counter[tuple[str, str]] = Counter()
        item_failed: Counter[tuple[str, str]] = Counter()
        for c in charges:
            calls[c.op] += 1
            for k, v in c.wru.items():
                wru[k] += v
            for k, v in c.rru.items():
                rru[k] += v
            for k, v in c.reported_wru.items():
                rep_wru[k] += v
            for k, v in c.reported_rru.items():
                rep_rru[k] += v
            row = by_label.setdefault(f"{c.label} ← {c.caller}", {
                "calls": 0, "wru": 0.0, "rru": 0.0, "reported_wru": 0.0, "reported_rru": 0.0})
            row["calls"] += 1
            row["wru"] += sum(c.wru.values())
            row["rru"] += sum(c.rru.values())
            row["reported_wru"] += sum(c.reported_wru.values())
            row["reported_rru"] += sum(c.reported_rru.values())
            for it in c.items:
                (item_ok if c.ok else item_failed)[it] += 1
        attempts = item_ok + item_failed
        top = attempts.most_common(1)
        top_ok = item_ok.most_common(1)
        hist: Counter[int] = Counter(item_ok.values())
        per_table_max: dict[str, int] = {}
        for (table, _), n in item_ok.items():
            per_table_max[table] = max(per_table_max.get(table, 0), n)
        return {
            "wru": dict(wru), "rru": dict(rru),
            "reported_wru": dict(rep_wru), "reported_rru": dict(rep_rru),
            "wru_total": sum(wru.values()), "rru_total": sum(rru.values()),
            "reported_wru_total": sum(rep_wru.values()),
            "reported_rru_total": sum(rep_rru.values()),
            "calls": dict(calls),
            "failed_writes": sum(1 for c in charges if not c.ok and c.op in _WRITE_OPS),
            "by_label": by_label,
            "unknown_before_images": self.unknown_before,
            "items_written": len(item_ok),
            "max_item_writes": top_ok[0][1] if top_ok else 0,
            "max_item": f"{top_ok[0][0][0]} {top_ok[0][0][1]}" if top_ok else "",
            "max_item_attempts": top[0][1] if top else 0,
            "max_item_attempts_item": f"{top[0][0][0]} {top[0][0][1]}" if top else "",
            "max_item_writes_by_table": per_table_max,
            "writes_per_item_histogram": {str(k): v for k, v in sorted(hist.items())},
            "max_item_size": dict(self.max_item_size),
        }
