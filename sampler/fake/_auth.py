"""Access tokens: which ones the provider accepts, and the refresh grant that issues new ones."""

from __future__ import annotations

import threading
from typing import Literal

import msgspec

__all__ = ["DEFAULT_REFRESH_TOKEN", "TokenBook", "TokenExpiry", "Verdict"]

DEFAULT_REFRESH_TOKEN = "fake-refresh-token"
"""The refresh token the provider honours unless `TokenExpiry.refresh_token` says otherwise."""

Verdict = Literal["ok", "missing", "expired"]


class TokenExpiry(msgspec.Struct, frozen=True, kw_only=True):
    """Access tokens that wear out: each serves `requests_per_token` model calls, then gets 401.

    Any token the provider has not seen before starts fresh, so a client can begin with any key. New
    tokens come from `POST /oauth/token` with grant `refresh_token` and `refresh_token`; with
    `rotate_refresh_token` every grant also replaces the refresh token, and the old one stops working.
    """

    requests_per_token: int = 5
    refresh_token: str = DEFAULT_REFRESH_TOKEN
    expires_in: int = 3600
    rotate_refresh_token: bool = False

    def __post_init__(self) -> None:
        if self.requests_per_token < 1:
            raise ValueError(f"requests_per_token must be at least 1, got {self.requests_per_token}")


class Grant(msgspec.Struct, frozen=True):
    """A successful refresh grant, as the token endpoint returns it."""

    access_token: str
    token_type: str
    expires_in: int
    refresh_token: str


class TokenBook:
    """Counts the uses of each access token and issues new ones. Thread-safe."""

    def __init__(self, expiry: TokenExpiry | None, *, require_key: bool = True) -> None:
        self._require_key = require_key
        self._limit = expiry.requests_per_token if expiry is not None else None
        self._expires_in = expiry.expires_in if expiry is not None else 3600
        self._rotate = expiry.rotate_refresh_token if expiry is not None else False
        self._refresh_tokens = {expiry.refresh_token if expiry is not None else DEFAULT_REFRESH_TOKEN}
        self._uses: dict[str, int] = {}
        self._expired: set[str] = set()
        self._issued = 0
        self._lock = threading.Lock()

    def admit(self, token: str | None) -> Verdict:
        """Whether a model call carrying `token` may go on; an admitted call uses the token once."""
        if not token:
            return "missing" if self._require_key else "ok"
        with self._lock:
            if token in self._expired:
                return "expired"
            if self._limit is None:
                return "ok"
            used = self._uses.get(token, 0)
            if used >= self._limit:
                self._expired.add(token)
                self._uses.pop(token, None)
                return "expired"
            self._uses[token] = used + 1
            return "ok"

    def expire(self, token: str) -> None:
        """Make `token` expired from now on."""
        with self._lock:
            self._expired.add(token)
            self._uses.pop(token, None)

    def refresh(self, refresh_token: str) -> Grant | None:
        """A new access token for a known refresh token; None when the refresh token is unknown."""
        with self._lock:
            if refresh_token not in self._refresh_tokens:
                return None
            self._issued += 1
            next_refresh = refresh_token
            if self._rotate:
                next_refresh = f"fake-refresh-{self._issued}"
                self._refresh_tokens.discard(refresh_token)
                self._refresh_tokens.add(next_refresh)
            return Grant(f"fake-access-{self._issued}", "Bearer", self._expires_in, next_refresh)
