"""The store's one transport seam: every DynamoDB request of the store goes through a
:class:`Transport` built here from one botocore client.

* ``lean`` (:class:`~whimbrel.store.lean.LeanTransport`, the default): DynamoDB JSON
  signed and sent on the botocore client's own HTTP session, with the endpoint, User-
  Agent, credentials and retry policy that client resolved. About 2.5x less CPU per
  request than botocore (docs/operations.md, "The transport").
* ``botocore`` (:class:`BotocoreTransport`): the botocore client itself, for whatever
  the lean path cannot honour (a non-SigV4 signer, a botocore whose internals moved) or
  when asked (``WHIMBREL_TRANSPORT=botocore``).

Both take the same DynamoDB JSON parameters, return the same responses, and fail through
the one translator (:func:`whimbrel.store.errors.translate`). The client comes from the
user's ``boto3_session`` and ``botocore_config`` when given (as Powertools' idempotency
layer takes them), else from a shared default session.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from whimbrel.store.errors import THROTTLING_CODES, RetryPolicy, translate
from whimbrel.store.lean import LeanTransport, RequestObserver, Resolved, RetryObserver

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
else:
    DynamoDBClient = Any

__all__ = ["TRANSPORT_KINDS", "BotocoreTransport", "Transport", "TransportKind",
           "botocore_client", "client_config", "open_transport", "resolve", "s3_client",
           "transport_for"]

TransportKind = Literal["auto", "lean", "botocore"]
TRANSPORT_KINDS: tuple[str, ...] = ("auto", "lean", "botocore")

#: Whimbrel's defaults where neither the caller's config nor the environment/profile
#: says otherwise: a busy process has many threads on one pool (activity threads, the
#: engine's I/O and fan-out pools, heartbeats), and a hot path gives up after 5 tries.
DEFAULT_POOL_CONNECTIONS = 128
DEFAULT_MAX_ATTEMPTS = 5
#: A DynamoDB call answers in milliseconds: fail over to a retry well before botocore's
#: 60 s defaults.
DEFAULT_CONNECT_TIMEOUT = 5.0
DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_REGION = "us-east-1"


class Transport(Protocol):
    """Sends one DynamoDB request (DynamoDB JSON in, the parsed JSON response out).

    Raises ``ConditionLost`` for a lost condition and ``StoreError`` for anything else
    (after the retries the policy allows).
    """

    name: str
    url: str
    region: str
    retry: RetryPolicy
    observers: list[RequestObserver]
    retry_observers: list[RetryObserver]

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]: ...


class BotocoreTransport:
    """The botocore client behind the seam (its own retries, parsing and validation)."""

    name = "botocore"

    def __init__(self, client: DynamoDBClient) -> None:
        self.client = client
        self.url = str(client.meta.endpoint_url)
        self.region = str(client.meta.region_name)
        self.retry = RetryPolicy.from_botocore(_retries(client.meta.config))
        self.observers: list[RequestObserver] = []
        self.retry_observers: list[RetryObserver] = []
        client.meta.events.register("needs-retry.dynamodb", self._seen_attempt,
                                    unique_id=f"whimbrel-retries-{id(self)}")

    def _seen_attempt(self, response: Any = None, caught_exception: Any = None,
                      operation: Any = None, **_: Any) -> None:
        """Counts the attempts that failed in a way botocore retries (it decides)."""
        if response is None and caught_exception is None:
            return
        code: str | None = None
        if response is not None:
            http, parsed = response
            code = (parsed or {}).get("Error", {}).get("Code")
            if http is not None and http.status_code < 500 and code not in THROTTLING_CODES \
                    and code not in ("InternalServerError", "ServiceUnavailable"):
                return
        reason = code or ("connection" if caught_exception is not None else "HTTP 5xx")
        for observer in self.retry_observers:
            observer(getattr(operation, "name", "?"), reason, 0.0,
                     throttled=code in THROTTLING_CODES)

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            data: dict[str, Any] = self.client._make_api_call(  # type: ignore[attr-defined]
                operation, params)
        except ClientError as exc:
            self._observe(operation, params, None)
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            raise translate(operation, error.get("Code"), str(error.get("Message") or exc),
                            status=status, item=_mapping(exc.response.get("Item"))) from exc
        except BotoCoreError as exc:  # connection failures, read timeouts, bad params
            self._observe(operation, params, None)
            raise translate(operation, None, str(exc)) from exc
        data.pop("ResponseMetadata", None)  # the lean client's responses have none
        self._observe(operation, params, data)
        return data

    def _observe(self, operation: str, params: dict[str, Any],
                 response: dict[str, Any] | None) -> None:
        for observer in self.observers:
            observer(operation, params, response)


def _retries(config: Config) -> Mapping[str, Any] | None:
    """A config's ``retries`` (botocore sets the attribute dynamically)."""
    retries: Mapping[str, Any] | None = getattr(config, "retries", None)
    return retries


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


_DEFAULT_LOCK = threading.Lock()
_DEFAULT_SESSION: boto3.session.Session | None = None


def _default_session() -> boto3.session.Session:
    """One shared session: it loads DynamoDB's service model once per process (~40 ms
    of CPU), not once per store."""
    global _DEFAULT_SESSION
    with _DEFAULT_LOCK:
        if _DEFAULT_SESSION is None:
            _DEFAULT_SESSION = boto3.session.Session()
        return _DEFAULT_SESSION


def botocore_client(*, endpoint_url: str | None = None, region: str | None = None,
                    boto3_session: boto3.session.Session | None = None,
                    botocore_config: Config | None = None) -> DynamoDBClient:
    """The DynamoDB client every decision of the store is taken from.

    The caller's ``botocore_config`` wins; Whimbrel adds only what neither it nor the
    environment/profile sets (pool size, timeouts, attempts, a ``whimbrel`` User-Agent
    suffix).
    """
    session = boto3_session or _default_session()
    config = client_config(session, botocore_config)
    region = region or session.region_name or DEFAULT_REGION
    with _DEFAULT_LOCK:  # creating clients from one session is not thread-safe
        client: DynamoDBClient = session.client("dynamodb", endpoint_url=endpoint_url,
                                                region_name=region, config=config)
    return client


def s3_client(*, region: str | None = None,
              boto3_session: boto3.session.Session | None = None,
              botocore_config: Config | None = None) -> Any:
    """The S3 client for large payloads: the same session and config as the DynamoDB
    client (credentials, region, proxies, CA bundle, retries, timeouts). Its endpoint is
    botocore's own choice — ``AWS_ENDPOINT_URL_S3`` (a local S3), else AWS — never the
    DynamoDB endpoint."""
    session = boto3_session or _default_session()
    config = client_config(session, botocore_config)
    region = region or session.region_name or DEFAULT_REGION
    with _DEFAULT_LOCK:
        return session.client("s3", region_name=region, config=config)


def client_config(session: boto3.session.Session, botocore_config: Config | None) -> Config:
    """Whimbrel's defaults merged under the caller's ``botocore_config``."""
    defaults: dict[str, Any] = {"max_pool_connections": DEFAULT_POOL_CONNECTIONS,
                                "connect_timeout": DEFAULT_CONNECT_TIMEOUT,
                                "read_timeout": DEFAULT_READ_TIMEOUT,
                                "user_agent_extra": "whimbrel"}
    if session._session.get_config_variable("max_attempts") is None:  # AWS_MAX_ATTEMPTS
        defaults["retries"] = {"total_max_attempts": DEFAULT_MAX_ATTEMPTS}
    config = Config(**defaults)
    if botocore_config is not None:
        config = config.merge(botocore_config)
        theirs = _retries(botocore_config)
        if theirs and "retries" in defaults and not (
                {"max_attempts", "total_max_attempts"} & set(theirs)):
            retries: Any = {**defaults["retries"], **theirs}
            config = config.merge(Config(retries=retries))
    return config


class _Probed(Exception):
    def __init__(self, url: str, user_agent: str | None) -> None:
        super().__init__(url)
        self.url = url
        self.user_agent = user_agent


def resolve(client: DynamoDBClient,
            credentials: Callable[[], Any]) -> Resolved | None:
    """Read what ``client`` decided, without sending anything: one GetItem is prepared
    by botocore as usual (endpoint rules, signing, User-Agent) and stopped at
    ``before-send``. None when the lean path cannot honour the client (a signer other
    than SigV4, or botocore internals it relies on are gone)."""
    config = client.meta.config
    if getattr(config, "signature_version", None) not in (None, "v4"):
        return None
    http_session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    if http_session is None or not hasattr(http_session, "send"):
        return None
    url, user_agent = str(client.meta.endpoint_url), None

    def stop(request: Any, **_: Any) -> None:
        raise _Probed(str(request.url), request.headers.get("User-Agent"))

    unique = f"whimbrel-probe-{id(client)}"
    client.meta.events.register_first("before-send.dynamodb.GetItem", stop, unique_id=unique)
    try:
        client.get_item(TableName="whimbrel-probe", Key={"k": {"S": "k"}})
    except _Probed as probed:
        url, user_agent = probed.url, probed.user_agent
        if isinstance(user_agent, bytes):
            user_agent = user_agent.decode()
    except BotoCoreError:  # no credentials yet: the first real call says so
        pass
    finally:
        client.meta.events.unregister("before-send.dynamodb.GetItem", unique_id=unique)
    return Resolved(url=url, region=str(client.meta.region_name),
                    signing_name=client.meta.service_model.signing_name or "dynamodb",
                    user_agent=user_agent,
                    credentials=credentials,
                    http_session=http_session,
                    retry=RetryPolicy.from_botocore(_retries(config)))


def transport_for(client: DynamoDBClient, *, kind: str = "auto",
                  boto3_session: boto3.session.Session | None = None,
                  sleep: Callable[[float], None] = time.sleep) -> Transport:
    """The transport over ``client``: lean unless ``kind`` is ``botocore`` or the lean
    path cannot honour the client (then botocore; ``kind="lean"`` refuses that instead).

    Raises:
        ValueError: ``kind`` is not one of :data:`TRANSPORT_KINDS`, or ``lean`` was
            asked for and cannot honour the client.
    """
    if kind not in TRANSPORT_KINDS:
        raise ValueError(f"transport must be one of {', '.join(TRANSPORT_KINDS)}, "
                         f"not {kind!r}")
    if kind == "botocore":
        return BotocoreTransport(client)
    session = boto3_session or _default_session()
    resolved = resolve(client, session.get_credentials)
    if resolved is None:
        if kind == "lean":
            raise ValueError("the lean transport cannot honour this botocore client "
                             "(a signer other than SigV4?); use transport='botocore'")
        return BotocoreTransport(client)
    return LeanTransport(resolved, sleep=sleep)


def open_transport(*, endpoint_url: str | None = None, region: str | None = None,
                   boto3_session: boto3.session.Session | None = None,
                   botocore_config: Config | None = None, kind: str = "auto",
                   sleep: Callable[[float], None] = time.sleep) -> Transport:
    """A botocore client from these arguments (:func:`botocore_client`) and the
    transport over it (:func:`transport_for`)."""
    client = botocore_client(endpoint_url=endpoint_url, region=region,
                             boto3_session=boto3_session, botocore_config=botocore_config)
    return transport_for(client, kind=kind, boto3_session=boto3_session, sleep=sleep)


def refuse_scans(monkeypatch: Any, message: str) -> None:
    """For tests: make every transport refuse a ``Scan`` (an ``AssertionError``), so a
    test can prove a path never scans a table. ``monkeypatch`` is pytest's fixture."""
    for cls in (LeanTransport, BotocoreTransport):
        original = cls.call

        def call(self: Any, operation: str, params: dict[str, Any],
                 _original: Any = original) -> dict[str, Any]:
            if operation == "Scan":
                raise AssertionError(message)
            result: dict[str, Any] = _original(self, operation, params)
            return result

        monkeypatch.setattr(cls, "call", call)
