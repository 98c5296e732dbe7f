"""A local stand-in for API Gateway: HTTP on 127.0.0.1 -> REST proxy events -> the API handler.

The caller's identity goes into the request context the way IAM authorization puts it there: the
default principal, or the one named by ``X-Jobsched-Principal`` (honoured only here, never by the
deployed API). The local runtime (issue #6) serves the API with it, and the schema fuzzing tests use it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from infra.local.console import ConsoleRequest

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# The local stand-in for SigV4: a request names its caller here, and the gateway puts it in the request
# context as API Gateway puts the signed identity. The deployed API never reads this header.
PRINCIPAL_HEADER = "x-jobsched-principal"


def proxy_event(
    method: str, target: str, headers: dict[str, str], body: str | None, principal: str | None
) -> dict[str, Any]:
    """The API Gateway REST (v1) proxy event for one HTTP request."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    caller = {k.lower(): v for k, v in headers.items()}.get(PRINCIPAL_HEADER) or principal
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
    ):
        """``on_response``: told each response's status (the local runtime counts them as API Gateway does)."""
        # One request at a time, like one Lambda instance: Powertools' resolver keeps the current event on
        # the app object, so concurrent calls into the same handler would see each other's requests.
        instance = threading.Lock()

        self.console = console  # /console...: HTML pages beside the API
        request_handler = _request_handler(self, handler, context, on_response, instance)
        self.principal = principal
        self.server = ThreadingHTTPServer((host, port), request_handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

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
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode(errors="replace") if length else None
            if gateway.console is not None and self.path.split("?")[0].startswith("/console"):
                caller = self.headers.get(PRINCIPAL_HEADER) or gateway.principal
                request = ConsoleRequest(
                    self.command, self.path, caller, body or "", self.headers.get("Origin"), self.headers.get("Host")
                )
                status, page = gateway.console(request)
                headers = {"Content-Type": "text/html; charset=utf-8"}
                _reply(self, {"statusCode": status, "headers": headers, "body": page}, None)
                return
            event = proxy_event(self.command, self.path, dict(self.headers.items()), body, gateway.principal)
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


def json_error(status: int, message: str) -> dict[str, Any]:
    body: dict[str, Any] = {"error": {"code": "gateway", "message": message, "field": None, "errors": []}}
    return {"statusCode": status, "headers": {"Content-Type": "application/json"}, "body": json.dumps(body)}
