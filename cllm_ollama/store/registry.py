"""Ollama's registry protocol: the Docker registry v2 API with Ollama's media types (server/images.go).

One ``Registry`` serves one pull or push: the base URL of the name's host, the bearer token a 401
challenge got it, and an httpx client. Failures are ``RegistryError`` with Ollama's texts: what
the registry does not have is ``file does not exist``, another HTTP failure ``<status>: <body>``,
a network failure names the request and its cause, all on one line.
"""

from __future__ import annotations

import re
import secrets
import time
import urllib.parse
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

import httpx

from .. import __version__
from ..config import proxied
from ..errors import CllmError
from . import manifests as mt
from .names import DEFAULT_HOST, ModelName

# A name written as http://host/... pulls and pushes over plain HTTP only with insecure.
INSECURE_PROTOCOL = "insecure protocol http"
NOT_EXIST = "file does not exist"
USER_AGENT = f"cllm/{__version__} (ollama-compatible)"
MAX_REDIRECTS = 10
_BODY_IN_ERROR = 300  # characters of an error response quoted in the message
Content = bytes | Callable[[], Iterable[bytes]] | None


class RegistryError(CllmError):
    """A registry request that failed; the message is one line."""


class RegistryNotFound(RegistryError):
    def __init__(self) -> None:
        super().__init__(NOT_EXIST)


def scheme_of(text: str) -> str | None:
    """The ``scheme`` of a name written as ``scheme://host/...``, else None."""
    return text.partition("://")[0].lower() if isinstance(text, str) and "://" in text else None


def registry_url(name: ModelName, *, insecure: bool, default_url: str, scheme: str | None = None) -> str:
    """Where ``name`` lives: ``default_url`` for registry.ollama.ai, else its host over HTTPS (HTTP if insecure).

    Raises ``RegistryError(INSECURE_PROTOCOL)`` for a name written with ``http://`` without insecure.
    """
    if scheme == "http" and not insecure:
        raise RegistryError(INSECURE_PROTOCOL)
    if name.host.lower() == DEFAULT_HOST:
        return default_url.rstrip("/")
    return f"{'http' if insecure or scheme == 'http' else 'https'}://{name.host}"


def _first_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _BODY_IN_ERROR else line[:_BODY_IN_ERROR] + "..."


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return _first_line(text)


def _challenge_value(header: str, key: str) -> str:
    m = re.search(rf'(?:^|[\s,]){re.escape(key)}="([^"]*)"', header) or re.search(
        rf"(?:^|[\s,]){re.escape(key)}=([^,\s]*)", header
    )
    return m.group(1) if m else ""


class Registry:
    """A Docker registry v2 server, with Ollama's bearer-token dance."""

    def __init__(self, base_url: str, *, signer: Callable[[str, str], str | None] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.netloc = httpx.URL(self.base_url).netloc.decode()
        self.token: str | None = None
        self._signer = signer
        self.client = httpx.Client(
            timeout=httpx.Timeout(60.0, connect=10.0),
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT},
            trust_env=proxied(self.base_url),
        )

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: tuple[type[BaseException], BaseException, TracebackType] | None) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()

    # -- URLs and headers ------------------------------------------------------------------

    def url(self, name: ModelName, *parts: str) -> str:
        return "/".join((self.base_url, "v2", name.namespace, name.model, *parts))

    def auth_headers(self, url: str | httpx.URL) -> dict[str, str]:
        """The Authorization header for ``url``: only ever sent to the registry's own host."""
        if self.token and httpx.URL(str(url)).netloc.decode() == self.netloc:
            return {"Authorization": f"Bearer {self.token}"}
        return {}

    # -- requests --------------------------------------------------------------------------

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: Content = None,
        follow: bool = True,
        stream: bool = False,
    ) -> httpx.Response:
        """One request with the token; a 401 Bearer challenge gets a token and one more try.

        Redirects are followed (the token only to the registry's host) unless ``follow`` is
        False. Network failures raise ``RegistryError``; HTTP statuses are the caller's.
        """
        for attempt in range(2):
            response = self._send_following(method, url, headers or {}, content, follow, stream)
            if response.status_code != 401:
                return response
            challenge = response.headers.get("www-authenticate", "")
            response.close()
            if attempt:
                break
            self.token = self._fetch_token(challenge)
        raise RegistryError("unauthorized: access denied")

    def _send_following(
        self, method: str, url: str, headers: dict[str, str], content: Content, follow: bool, stream: bool
    ) -> httpx.Response:
        for _ in range(MAX_REDIRECTS + 1):
            body = content() if callable(content) else content
            request = self.client.build_request(
                method, url, headers={**headers, **self.auth_headers(url)}, content=body
            )
            try:
                response = self.client.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise RegistryError(f'{method.capitalize()} "{url}": {_reason(exc)}') from exc
            if not (follow and response.is_redirect):
                if not stream:
                    try:
                        response.read()
                    except httpx.HTTPError as exc:
                        raise RegistryError(f'{method.capitalize()} "{url}": {_reason(exc)}') from exc
                    finally:
                        response.close()
                return response
            response.close()
            url = str(response.url.join(response.headers["location"]))
            if response.status_code == 303 or (response.status_code in (301, 302) and method == "POST"):
                method, content = "GET", None
        raise RegistryError(f"maximum redirects exceeded ({MAX_REDIRECTS})")

    def _fetch_token(self, challenge: str) -> str:
        """A token from the challenge's realm, as Ollama's getAuthorizationToken asks for it."""
        if not challenge.lower().startswith("bearer "):
            kind = challenge.split(" ", 1)[0] or "unknown"
            raise RegistryError(f"unauthorized: the registry asks for {kind} authentication, which cllm does not do")
        realm = _challenge_value(challenge, "realm")
        service = _challenge_value(challenge, "service")
        scope = _challenge_value(challenge, "scope")
        try:
            realm_url = httpx.URL(realm)
        except httpx.InvalidURL as exc:
            raise RegistryError(f"unauthorized: invalid token realm {realm!r}") from exc
        # Never hand a signed request (or later the token) to another host than the one that asked.
        realm_host = realm_url.netloc.decode()
        if realm_host != self.netloc:
            raise RegistryError(f'realm host "{realm_host}" does not match original host "{self.netloc}"')
        # As Go's url.Values.Encode writes it (keys in order), since the signature covers the URL.
        params = list(urllib.parse.parse_qsl(realm_url.query.decode(), keep_blank_values=True))
        params += [("service", service)]
        params += [("scope", s) for s in scope.split(" ")]
        params += [("ts", str(int(time.time()))), ("nonce", secrets.token_urlsafe(16))]
        params.sort(key=lambda kv: kv[0])
        url = str(realm_url.copy_with(query=None)) + "?" + urllib.parse.urlencode(params)
        headers: dict[str, str] = {}
        signature = self._signer("GET", str(url)) if self._signer else None
        if signature:
            headers["Authorization"] = signature
        try:
            response = self.client.get(url, headers=headers, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise RegistryError(f'Get "{url}": {_reason(exc)}') from exc
        if response.status_code >= 400:
            body = _first_line(response.text)
            raise RegistryError(f"{response.status_code}: {body}" if body else str(response.status_code))
        try:
            data: Any = response.json()
            token = data.get("token") or data.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryError("unauthorized: the registry's token service answered without a token")
        return token

    @staticmethod
    def check(response: httpx.Response) -> httpx.Response:
        """``response`` if it succeeded; 404 is ``file does not exist``, others ``<status>: <body>``."""
        if response.status_code == 404:
            raise RegistryNotFound()
        if response.status_code >= 400:
            try:
                body = _first_line(response.text)
            except httpx.ResponseNotRead:
                body = ""
            raise RegistryError(f"{response.status_code}: {body}")
        return response

    # -- the operations pull and push use --------------------------------------------------

    def manifest(self, name: ModelName) -> bytes:
        url = self.url(name, "manifests", name.tag)
        return self.check(self.send("GET", url, headers={"Accept": mt.MANIFEST_MEDIA_TYPE})).content

    def blob_source(self, name: ModelName, digest: str) -> tuple[str, dict[str, str]]:
        """Where the bytes of ``digest`` are fetched from, and the headers to send there.

        As Ollama does: redirects on the registry's host are followed, the first one to another
        host (the public registry's CDN) is where the parts are fetched, without the token.
        """
        url = self.url(name, "blobs", digest)
        for _ in range(MAX_REDIRECTS + 1):
            response = self.send("GET", url, follow=False, stream=True)
            try:
                if response.is_redirect:
                    target = response.url.join(response.headers["location"])
                    if target.netloc.decode() != self.netloc:
                        return str(target), {}
                    url = str(target)
                    continue
                if response.status_code >= 400:
                    response.read()
                self.check(response)
                return url, self.auth_headers(url)
            except httpx.HTTPError as exc:
                raise RegistryError(f'Get "{url}": {_reason(exc)}') from exc
            finally:
                response.close()
        raise RegistryError(f"maximum redirects exceeded ({MAX_REDIRECTS}) for directURL")

    def has_blob(self, name: ModelName, digest: str) -> bool:
        response = self.send("HEAD", self.url(name, "blobs", digest))
        if response.status_code == 404:
            return False
        self.check(response)
        return True

    def put_manifest(self, name: ModelName, data: bytes) -> None:
        url = self.url(name, "manifests", name.tag)
        self.check(self.send("PUT", url, headers={"Content-Type": mt.MANIFEST_MEDIA_TYPE}, content=data))
