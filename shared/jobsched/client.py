"""The HTTP client the CLI uses: JSON over HTTPS, SigV4-signed from the standard AWS credential chain
when the API is on AWS; plain HTTP for the local runtime. The transport is pluggable so the CLI can be
tested against the API in-process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlencode, urlsplit

LOCAL_API = "http://127.0.0.1:8080"


class ClientError(Exception):
    """The API refused the request (4xx): the caller's input is wrong. Exit code 1."""

    def __init__(self, status: int, body: Any) -> None:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code", "error")
        self.field = error.get("field")
        self.errors = error.get("errors") or []
        super().__init__(error.get("message") or f"HTTP {status}")


class ServiceError(Exception):
    """The API or the network failed (5xx, connection). Exit code 2."""


@dataclass(frozen=True)
class HttpResult:
    status: int
    body: Any
    headers: dict[str, str]


class Transport(Protocol):
    def __call__(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> HttpResult: ...


class HttpTransport:
    def __init__(self, base_url: str, *, sign: bool | None = None, region: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        host = urlsplit(self.base_url).hostname or ""
        self.sign = sign if sign is not None else host not in ("127.0.0.1", "localhost", "::1")
        self.region = region or _region_of(host)
        import urllib3  # here, not at import: `jobsched --help` needs no HTTP

        self.http = urllib3.PoolManager(
            retries=urllib3.Retry(total=2, backoff_factor=0.5, allowed_methods=None, status_forcelist=(502, 503, 504))
        )

    def __call__(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> HttpResult:
        import urllib3

        url = self.base_url + path
        headers = {"Content-Type": "application/json", **headers}
        if self.sign:
            headers = self._signed(method, url, body, headers)
        try:
            response = self.http.request(method, url, body=body, headers=headers, timeout=urllib3.Timeout(total=30))
        except urllib3.exceptions.HTTPError as error:
            raise ServiceError(f"cannot reach {self.base_url}: {type(error).__name__}") from None
        text = response.data.decode(errors="replace")
        try:
            parsed = json.loads(text) if text else None
        except json.JSONDecodeError:
            parsed = text
        return HttpResult(response.status, parsed, dict(response.headers))

    def _signed(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> dict[str, str]:
        import boto3
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        credentials = boto3.session.Session().get_credentials()
        if credentials is None:
            raise ServiceError("no AWS credentials found to sign the request (standard credential chain)")
        request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
        SigV4Auth(credentials.get_frozen_credentials(), "execute-api", self.region).add_auth(request)
        return dict(request.headers.items())


def _region_of(host: str) -> str:
    # https://{api-id}.execute-api.{region}.amazonaws.com
    parts = host.split(".")
    if "execute-api" in parts and len(parts) > parts.index("execute-api") + 1:
        return parts[parts.index("execute-api") + 1]
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


class ApiClient:
    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        allow: tuple[int, ...] = (),
    ) -> HttpResult:
        if query:
            path += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        result = self.transport(method, path, data, headers or {})
        if result.status in allow or 200 <= result.status < 300:
            return result
        if 400 <= result.status < 500:
            raise ClientError(result.status, result.body)
        raise ServiceError(f"the API failed: HTTP {result.status}")

    def paged(self, path: str, key: str, query: dict[str, Any] | None = None, *, limit: int | None = None) -> list[Any]:
        """Every item of a paginated list (or the first ``limit``), 100 a request."""
        items: list[Any] = []
        token = None
        while limit is None or len(items) < limit:
            size = 100 if limit is None else min(100, limit - len(items))
            page = self.call("GET", path, query={**(query or {}), "limit": size, "next_token": token}).body
            items += page[key]
            token = page.get("next_token")
            if not token:
                break
        return items
