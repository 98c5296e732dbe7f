"""A local stand-in for API Gateway: HTTP on 127.0.0.1 -> REST proxy events -> the API handler.

The caller's identity goes into the request context the way IAM authorization puts it there: the one named
by ``X-Jobsched-Principal`` (honoured only here, never by the deployed API), else the default principal. The
local runtime (issue #6) serves the API with it, and the schema fuzzing tests use it.

What it trusts, since any website a developer visits can make their browser send requests here (#26):
- Only a loopback ``Host`` (127.0.0.0/8, ``localhost``, ``[::1]``): a DNS-rebinding name is refused.
- A request that changes something (any method but GET and HEAD) that carries an ``Origin`` must come from
  this gateway's own origin; a browser's (one with fetch metadata, ``Sec-Fetch-Site``) must carry one, and so
  must every console form post.
- The default principal is for programs (the CLI, curl, tests: no ``Origin``, no ``Sec-Fetch-Site``). A
  browser acts as it only with the console key that ``make run`` prints (the link's ``?key=``, then a
  SameSite=Strict cookie), so another site's page never acts as the platform admin.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import threading
import uuid
from collections.abc import Callable
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from infra.local.console import ConsoleRequest
from jobsched.core.bounds import parse_bounded_int

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# The local stand-in for SigV4: a request names its caller here, and the gateway puts it in the request
# context as API Gateway puts the signed identity. The deployed API never reads this header.
PRINCIPAL_HEADER = "x-jobsched-principal"
CONSOLE_KEY_PARAMETER = "key"  # /console?key=...: the link make run prints
CONSOLE_KEY_COOKIE = "jobsched_console"
SAFE_METHODS = ("GET", "HEAD")


class Refused(Exception):
    """A request the local gateway does not pass on: (status, stable code, message)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def loopback_host(host_header: str | None) -> bool:
    """``Host`` names this machine: 127.0.0.0/8, ::1 or localhost, with any port."""
    if not host_header:
        return False
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else ""
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_browser(headers: dict[str, str]) -> bool:
    """A browser sends fetch metadata on every request (and Origin on cross-site ones); programs send neither."""
    return "sec-fetch-site" in headers or "origin" in headers


def check_request(method: str, headers: dict[str, str], *, console: bool) -> None:
    """The local trust rules (module docstring); ``headers`` with lower-case names. Raises ``Refused``."""
    host = headers.get("host")
    if not loopback_host(host):
        raise Refused(403, "host_not_allowed", f"this local stack answers only to a loopback Host, not {host!r}")
    if method.upper() in SAFE_METHODS:
        return
    origin = headers.get("origin")
    if origin is None and (console or "sec-fetch-site" in headers):
        raise Refused(403, "cross_site", f"a browser's {method} must carry an Origin header")
    if origin is not None and origin != f"http://{host}":
        raise Refused(403, "cross_site", f"a {method} from {origin} is not from this local stack (http://{host})")


def proxy_event(
    method: str, target: str, headers: dict[str, str], body: str | None, caller: str | None
) -> dict[str, Any]:
    """The API Gateway REST (v1) proxy event for one HTTP request, signed (as IAM would) by ``caller``."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    return {
        "resource": parts.path,
        "path": parts.path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": dict(query) or None,
        "multiValueQueryStringParameters": {k: [v for key, v in query if key == k] for k, _ in query} or None,
        "pathParameters": None,
        "requestContext": {
            "requestId": uuid.uuid4().hex,
            "httpMethod": method,
            "path": parts.path,
            "identity": {"userArn": caller} if caller else {},
        },
        "body": body,
        "isBase64Encoded": False,
    }


class LocalGateway:
    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        principal: str | None = None,
        context: Any = None,
        on_response: Callable[[int], None] | None = None,
        console: Callable[[ConsoleRequest], tuple[int, str]] | None = None,
        console_key: str | None = None,
    ):
        """``on_response``: told each response's status (the local runtime counts them as API Gateway does).
        ``console_key``: what a browser shows to act as ``principal`` (default: a new random one)."""
        # One request at a time, like one Lambda instance: Powertools' resolver keeps the current event on
        # the app object, so concurrent calls into the same handler would see each other's requests.
        instance = threading.Lock()

        self.console = console  # /console...: HTML pages beside the API
        request_handler = _request_handler(self, handler, context, on_response, instance)
        self.principal = principal
        self.console_key = console_key or secrets.token_urlsafe(24)
        self.server = ThreadingHTTPServer((host, port), request_handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def console_url(self) -> str:
        """The console's link with its key: a browser that opened it acts as the default principal."""
        return f"{self.url}/console?{CONSOLE_KEY_PARAMETER}={self.console_key}"

    def caller(self, headers: dict[str, str], query_key: str | None) -> str | None:
        """Who a request acts as: the principal it names; else, for a program or a browser holding the console
        key, the default principal; else nobody (the API answers 401)."""
        named = headers.get(PRINCIPAL_HEADER)
        if named:
            return named
        if not is_browser(headers):
            return self.principal
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        held = cookie[CONSOLE_KEY_COOKIE].value if CONSOLE_KEY_COOKIE in cookie else query_key
        return self.principal if held and hmac.compare_digest(held.encode(), self.console_key.encode()) else None

    def start(self) -> LocalGateway:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _request_handler(
    gateway: LocalGateway,
    handler: Handler,
    context: Any,
    on_response: Callable[[int], None] | None,
    instance: threading.Lock,
) -> type[BaseHTTPRequestHandler]:
    """HTTP -> the proxy event API Gateway would send -> the API handler -> HTTP."""

    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            headers = {name.lower(): value for name, value in self.headers.items()}
            console = gateway.console is not None and urlsplit(self.path).path.startswith("/console")
            length = parse_bounded_int(headers.get("content-length", "0").strip(), max_digits=9)
            try:
                if length is None:
                    raise Refused(400, "bad_content_length", "Content-Length is not a number of bytes")
                check_request(self.command, headers, console=console)
            except Refused as refused:
                self.close_connection = True  # the body, if any, is left unread
                _reply(self, refusal_result(refused, console=console), None if console else on_response)
                return
            body = self.rfile.read(length).decode(errors="replace") if length else None
            if console:
                _reply(self, console_result(gateway, self.command, self.path, headers, body), None)
                return
            caller = gateway.caller(headers, None)
            event = proxy_event(self.command, self.path, dict(self.headers.items()), body, caller)
            try:
                with instance:
                    result = handler(event, context)
            except Exception as error:
                result = json_error(502, f"the API function failed: {type(error).__name__}")
            _reply(self, result, on_response)

        def __getattr__(self, name: str) -> Any:
            # Every method goes to the API, which answers one it has no route for with 405 and the methods
            # the path has (instead of http.server's HTML 501).
            if name.startswith("do_"):
                return self._serve
            raise AttributeError(name)

        def log_message(self, *args: Any) -> None:
            pass

    return RequestHandler


def _reply(request: BaseHTTPRequestHandler, result: dict[str, Any], on_response: Callable[[int], None] | None) -> None:
    """A proxy-integration result as the HTTP response."""
    payload = (result.get("body") or "").encode()
    if on_response is not None:
        on_response(int(result["statusCode"]))
    request.send_response(int(result["statusCode"]))
    headers = {k: v[-1] for k, v in (result.get("multiValueHeaders") or {}).items()}
    headers.update(result.get("headers") or {})
    for name, value in headers.items():
        if name.lower() != "content-length":
            request.send_header(name, value)
    request.send_header("Content-Length", str(len(payload)))
    request.end_headers()
    request.wfile.write(payload)


# The console's pages: never framed by another site's page; no script of any origin runs in them.
CONSOLE_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'",
}


def console_result(
    gateway: LocalGateway, method: str, target: str, headers: dict[str, str], body: str | None
) -> dict[str, Any]:
    """A console page for the caller the request proves; opening the key's link keeps the key in a cookie."""
    assert gateway.console is not None
    query = dict(parse_qsl(urlsplit(target).query))
    caller = gateway.caller(headers, query.get(CONSOLE_KEY_PARAMETER))
    status, page = gateway.console(ConsoleRequest(method, target, caller, body or ""))
    reply_headers = dict(CONSOLE_HEADERS)
    if caller is not None and query.get(CONSOLE_KEY_PARAMETER) == gateway.console_key:
        reply_headers["Set-Cookie"] = (
            f"{CONSOLE_KEY_COOKIE}={gateway.console_key}; Path=/console; HttpOnly; SameSite=Strict"
        )
    return {"statusCode": status, "headers": reply_headers, "body": page}


def refusal_result(refused: Refused, *, console: bool) -> dict[str, Any]:
    """The refusal, closing the connection: the request's body is left unread, so the socket cannot be reused."""
    if console:
        result: dict[str, Any] = {"statusCode": refused.status, "headers": {"Content-Type": "text/plain"}}
        result["body"] = str(refused)
    else:
        result = json_error(refused.status, str(refused), refused.code)
    result["headers"]["Connection"] = "close"
    return result


def json_error(status: int, message: str, code: str = "gateway") -> dict[str, Any]:
    body: dict[str, Any] = {"error": {"code": code, "message": message, "field": None, "errors": []}}
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
