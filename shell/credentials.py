"""Where the credential sent to the model provider comes from, and how a refused one is replaced.

A :class:`CredentialProvider` hands out the current credential cheaply from any thread and, when the
provider refuses it, gets a new one with :meth:`~CredentialProvider.refresh`. A refresh that cannot help
raises :class:`CredentialRefreshError`, whose message tells the user what to do. No credential ever
appears in a message, a log or a ``repr``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import httpx
import msgspec
import trio

from ._secrets import REDACTED, redact

__all__ = [
    "REFRESH_TIMEOUT",
    "CredentialProvider",
    "CredentialRefreshError",
    "NoCredentials",
    "OAuthCredential",
    "StaticKey",
    "refresh_failure",
]

REFRESH_TIMEOUT = 10.0
"""Seconds a token refresh may take, all of it (connecting, sending, waiting for and reading the reply)."""

_DETAIL_LIMIT = 300


class CredentialRefreshError(Exception):
    """A credential could not be refreshed; the message says why and what the user should do.

    The message never contains a credential.
    """


@runtime_checkable
class CredentialProvider(Protocol):
    """A source of the credential (an API key or an access token) sent with every model request."""

    def current(self) -> str | None:
        """The credential to send now, or ``None`` for none; cheap, non-blocking and thread-safe."""
        ...

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Replace the credential after the provider refused it; afterwards :meth:`current` returns the
        new one. Raises :class:`CredentialRefreshError` when no usable credential could be obtained."""
        ...


class NoCredentials:
    """No credential at all, for local servers that ask for none."""

    def current(self) -> None:
        """Always ``None``."""
        return None

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Always raises :class:`CredentialRefreshError`: there is nothing to refresh."""
        raise CredentialRefreshError(
            "no credentials configured, but the provider asks for them; configure an API key "
            "(provider.api_key_env or provider.api_key_file) or an OAuth login"
        )

    def __repr__(self) -> str:
        return "turnkeep.NoCredentials()"


class StaticKey:
    """An API key read from the environment variable ``env_var`` or from the file ``file``.

    With both, the variable wins when it is set and not blank; a file holds the key alone (surrounding
    whitespace is ignored). The key is read when the object is made; when it is missing then,
    :meth:`current` returns ``None`` until a :meth:`refresh` finds it. ``repr`` shows where the key comes
    from, never the key. Raises ``ValueError`` when neither source is given.
    """

    def __init__(
        self,
        env_var: str | None = None,
        file: str | Path | None = None,
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        if env_var is None and file is None:
            raise ValueError("a turnkeep.StaticKey needs an env_var or a file to read the key from")
        self._env_var = env_var
        self._file = Path(file) if file is not None else None
        self._environ = environ
        self._key, _problem = self._read()

    def current(self) -> str | None:
        """The key as last read, or ``None`` when it was missing."""
        return self._key

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Read the key again from its source, since the user may have replaced it.

        Raises :class:`CredentialRefreshError` naming the variable or file when the key is missing or
        blank or the file cannot be read; the previous key is kept then.
        """
        key, problem = self._read()
        if key is None:
            raise CredentialRefreshError(f"{problem}; {self._advice()}")
        self._key = key

    def _read(self) -> tuple[str | None, str]:
        problems = []
        if self._env_var is not None:
            value = self._environ.get(self._env_var, "").strip()
            if value:
                return value, ""
            problems.append(f"the environment variable ${self._env_var} is not set or empty")
        if self._file is not None:
            try:
                # A key file is a few bytes on a local disk: reading it does not stall the event loop.
                value = self._file.read_text(encoding="utf-8").strip()
            except FileNotFoundError:
                problems.append(f"the API key file {self._file} does not exist")
            except UnicodeDecodeError:
                problems.append(f"the API key file {self._file} is not UTF-8 text")
            except OSError as error:
                reason = error.strerror or type(error).__name__
                problems.append(f"the API key file {self._file} cannot be read ({reason})")
            else:
                if value:
                    return value, ""
                problems.append(f"the API key file {self._file} is empty")
        return None, "no API key: " + " and ".join(problems)

    def _advice(self) -> str:
        places = []
        if self._env_var is not None:
            places.append(f"${self._env_var}")
        if self._file is not None:
            places.append(str(self._file))
        return f"fix the API key in {' or '.join(places)}"

    def __repr__(self) -> str:
        state = "set" if self._key is not None else "missing"
        file = str(self._file) if self._file is not None else None
        return f"turnkeep.StaticKey(env_var={self._env_var!r}, file={file!r}, key=<{state}>)"


class _Tokens(msgspec.Struct, frozen=True):
    access: str | None
    refresh: str


class _Grant(msgspec.Struct, frozen=True):
    access_token: str | None = None
    refresh_token: str | None = None


class OAuthCredential:
    """An OAuth access token, renewed with the refresh-token grant at ``token_url``.

    :meth:`current` is the access token (``None`` until the first refresh when none was given). A refresh
    posts ``grant_type=refresh_token`` with the refresh token (and ``client_id`` when given) as a form to
    ``token_url`` and takes the new access token, and the new refresh token when the server rotates it,
    from the JSON reply. Both tokens change together, so a reader on another thread never sees a mix.
    Concurrent refreshes share one request. ``repr`` hides the tokens.
    """

    def __init__(
        self,
        token_url: str,
        refresh_token: str,
        access_token: str | None = None,
        client_id: str | None = None,
    ) -> None:
        if not refresh_token:
            raise ValueError("a turnkeep.OAuthCredential needs a refresh token")
        self._token_url = token_url
        self._client_id = client_id
        self._tokens = _Tokens(access_token or None, refresh_token)
        self._generation = 0
        self._lock = trio.Lock()

    def current(self) -> str | None:
        """The access token, or ``None`` before the first successful refresh when none was given."""
        return self._tokens.access

    def refresh_token(self) -> str:
        """The refresh token in use (the latest one, when the endpoint rotates it), for keeping it out of
        tool output, events and the store; never show or log it."""
        return self._tokens.refresh

    async def refresh(self, client: httpx.AsyncClient) -> None:
        """Get a new access token from the token endpoint; the whole exchange takes at most
        :data:`REFRESH_TIMEOUT` seconds.

        Raises :class:`CredentialRefreshError` when the endpoint cannot be reached or times out, answers
        with an error status, or gives no usable access token; the message carries the status and the
        endpoint's error, never a token, and the current tokens are kept. A refresh that waited for another
        one in progress returns as soon as that one succeeded.
        """
        seen = self._generation
        async with self._lock:
            if self._generation != seen:
                return
            grant = await self._request(client, self._tokens.refresh)
            self._tokens = _Tokens(grant.access_token, grant.refresh_token or self._tokens.refresh)
            self._generation += 1

    async def _request(self, client: httpx.AsyncClient, refresh_token: str) -> _Grant:
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if self._client_id is not None:
            form["client_id"] = self._client_id
        response: httpx.Response | None = None
        with trio.move_on_after(REFRESH_TIMEOUT):
            try:
                response = await client.post(
                    self._token_url,
                    data=form,
                    headers={"Accept": "application/json"},
                    timeout=httpx.Timeout(REFRESH_TIMEOUT),
                )
            except httpx.TimeoutException:
                pass
            except httpx.HTTPError as error:
                raise CredentialRefreshError(
                    f"the token endpoint {self._token_url} could not be reached ({type(error).__name__}); "
                    "check the network and try again, or log in again"
                ) from None
        if response is None:
            raise CredentialRefreshError(
                f"the token endpoint {self._token_url} did not answer within {REFRESH_TIMEOUT:g} s; "
                "try again later, or log in again"
            )
        if not response.is_success:
            detail = _provider_error(response.content, (refresh_token, self._tokens.access))
            advice = "try again later, or log in again" if response.status_code >= 500 else "log in again"
            raise CredentialRefreshError(
                f"the token endpoint answered HTTP {response.status_code}"
                + (f" ({detail})" if detail else "")
                + f"; {advice}"
            )
        try:
            grant = msgspec.json.decode(response.content, type=_Grant)
        except msgspec.DecodeError:
            raise CredentialRefreshError(
                f"the token endpoint answered HTTP {response.status_code} with a reply that is not a JSON "
                "token object; log in again"
            ) from None
        if not grant.access_token:
            raise CredentialRefreshError(
                f"the token endpoint answered HTTP {response.status_code} without an access_token; "
                "log in again"
            )
        return grant

    def __repr__(self) -> str:
        access = "set" if self._tokens.access is not None else "missing"
        return (
            f"turnkeep.OAuthCredential(token_url={self._token_url!r}, client_id={self._client_id!r}, "
            f"access_token=<{access}>, refresh_token=<set>)"
        )


def _provider_error(body: bytes, secrets: tuple[str | None, ...]) -> str:
    """The endpoint's own words about an error (OAuth ``error`` and ``error_description``, or a nested
    ``error.message``), without ``secrets`` or anything else that looks like one, trimmed; "" when it said
    nothing readable."""
    try:
        data: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        text = body.decode("utf-8", "replace").strip()
        # An HTML error page says nothing a user can act on.
        return _clean(text, secrets) if text and not text.startswith("<") else ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    parts: list[str] = []
    if isinstance(error, str):
        parts.append(error)
    elif isinstance(error, dict):
        for key in ("type", "code", "message"):
            if isinstance(error.get(key), str):
                parts.append(error[key])
    description = data.get("error_description") or data.get("message")
    if isinstance(description, str):
        parts.append(description)
    return _clean(": ".join(part for part in parts if part.strip()), secrets)


def _clean(text: str, secrets: tuple[str | None, ...]) -> str:
    text = " ".join(text.split())
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = redact(text)
    return text if len(text) <= _DETAIL_LIMIT else text[: _DETAIL_LIMIT - 1] + "…"


async def refresh_failure(credentials: CredentialProvider) -> str | None:
    """Refresh ``credentials`` over a connection of its own: ``None`` when it worked, else why it did not
    (never a credential). Never raises, except for cancellation."""
    try:
        async with httpx.AsyncClient(timeout=REFRESH_TIMEOUT) as client:
            await credentials.refresh(client)
    except CredentialRefreshError as exc:
        return str(exc)
    except Exception as exc:
        return redact(f"{type(exc).__name__}: {exc}")
    return None
