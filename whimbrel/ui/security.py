"""Who may do what in the console (docs/console.md, "Security").

As Jupyter does: ``whimbrel ui`` prints a URL with a random token; opening it sets an
``HttpOnly``, ``SameSite=Strict`` cookie and redirects to the same page without the
token. Every action (a POST) needs that cookie *and* a form field derived from the
token, and is refused (403) from another origin. Reads are open when the console is
bound to loopback, and need the cookie too otherwise. The Host header is checked
against the names the console is reached by, so a DNS-rebinding page cannot read it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from urllib.parse import quote, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

TOKEN_QUERY = "token"
CSRF_FIELD = "csrf"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

#: Sent with every response. No inline script or style is ever needed: htmx and the
#: console's own script and stylesheet are files under /static.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def new_token() -> str:
    return secrets.token_urlsafe(32)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Guard:
    """The token and the checks that use it.

    Args:
        token: the secret printed at start.
        open_reads: pages may be read without the token (True only on loopback).
        allowed_hosts: host names the Host header may carry; None allows any (for a
            console bound to all interfaces, where the token guards reads too).
    """

    def __init__(self, token: str, *, open_reads: bool,
                 allowed_hosts: Iterable[str] | None) -> None:
        if len(token) < 16:
            raise ValueError("the console token must be at least 16 characters")
        self.token = token
        self.open_reads = open_reads
        self.allowed_hosts = None if allowed_hosts is None else frozenset(allowed_hosts)
        self.csrf = hmac.new(token.encode(), b"whimbrel-console-csrf",
                             hashlib.sha256).hexdigest()

    @staticmethod
    def cookie_name(request: Request) -> str:
        # Cookies ignore the port: one name per port keeps two consoles apart.
        return f"whimbrel_console_{request.url.port or 80}"

    def signed_in(self, request: Request) -> bool:
        given = request.cookies.get(self.cookie_name(request), "")
        return hmac.compare_digest(given.encode(), self.token.encode())

    def refusal(self, request: Request, form_csrf: str | None) -> str | None:
        """Why an action request must be refused, or None when it may run."""
        if not self.signed_in(request):
            return ("actions need the console token: open the URL `whimbrel ui` printed "
                    "(it ends in ?token=…) in this browser first")
        if not hmac.compare_digest((form_csrf or "").encode(), self.csrf.encode()):
            return "the form is not from this console (missing or wrong csrf field)"
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get(
                "host", ""):
            return f"the request comes from another site ({origin})"
        return None

    def host_allowed(self, host_header: str) -> bool:
        if self.allowed_hosts is None:
            return True
        host = urlsplit(f"//{host_header}").hostname or ""
        return host in self.allowed_hosts


class GuardMiddleware:
    """Host check, sign-in through ``?token=``, closed reads when configured, and the
    security headers on every response."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        response = self._intercept(request)
        if response is not None:
            await _with_headers(response)(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, object]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))  # type: ignore[call-overload]
                headers += [(k.lower().encode(), v.encode())
                            for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)  # type: ignore[arg-type]

    def _intercept(self, request: Request) -> Response | None:
        guard = self.guard
        if not guard.host_allowed(request.headers.get("host", "")):
            return PlainTextResponse("this console is not served under that host name",
                                     status_code=400)
        token = request.query_params.get(TOKEN_QUERY)
        if token is not None and request.method == "GET":
            if not hmac.compare_digest(token.encode(), guard.token.encode()):
                return PlainTextResponse("wrong console token", status_code=403)
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != TOKEN_QUERY]
            target = local_path(request.url.path) + (f"?{urlencode(rest)}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            redirect.set_cookie(guard.cookie_name(request), guard.token, httponly=True,
                                samesite="strict", path="/")
            return redirect
        if (not guard.open_reads and not request.url.path.startswith("/static/")
                and not guard.signed_in(request)):
            return PlainTextResponse("open the URL `whimbrel ui` printed (with its "
                                     "?token=…) to use this console", status_code=403)
        return None


def local_path(path: str) -> str:
    """``path`` as a redirect target that stays on this site: one leading ``/`` and the
    rest percent-encoded. A browser reads ``//host/x`` (and ``/\\host/x``: it takes a
    backslash for a slash, and drops tabs and newlines) as another site, and the path
    reaches here decoded (``/%2F%2Fhost`` is ``///host``): so the leading slashes and
    backslashes go, and what could still be read as one is encoded."""
    return "/" + quote(path.lstrip("/\\"), safe="/!$&'()*+,;=:@-._~")


def _with_headers(response: Response) -> Response:
    for key, value in SECURITY_HEADERS.items():
        response.headers[key] = value
    return response

