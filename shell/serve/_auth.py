"""Who may use the API: the bearer token, compared in constant time, and where the server may listen."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Mapping

from ..config import SERVE_TOKEN_ENV

__all__ = ["TOKEN_ENV", "ServeRefused", "authorized", "check_bind", "is_loopback", "resolve_token"]

TOKEN_ENV = SERVE_TOKEN_ENV
"""The environment variable that holds the API's bearer token."""

_SCHEME = "bearer "


class ServeRefused(Exception):
    """The server must not start as configured (for instance, a non-loopback address without a token)."""


def resolve_token(environ: Mapping[str, str]) -> tuple[str, bool]:
    """The API token and whether it was generated: ``TURNKEEP_SERVE_TOKEN`` when set (not blank), else a
    new random one (32 bytes, URL-safe) that only this process knows. Raises :class:`ServeRefused` for a
    token shorter than 16 characters."""
    given = environ.get(TOKEN_ENV, "").strip()
    if not given:
        return secrets.token_urlsafe(32), True
    if len(given) < 16:
        raise ServeRefused(f"${TOKEN_ENV} is too short: a token needs at least 16 characters")
    return given, False


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) names this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, *, token_from_environment: bool) -> None:
    """Refuse (:class:`ServeRefused`) to listen on a non-loopback address unless the token was given in
    the environment: a generated token printed on a terminal is not a secret to share with a network."""
    if not is_loopback(host) and not token_from_environment:
        raise ServeRefused(
            f"refusing to listen on {host} without a token: set ${TOKEN_ENV} (16 characters or more)"
        )


def authorized(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as a bearer token; the comparison takes the
    same time wherever the first difference is."""
    if header is None or header[: len(_SCHEME)].lower() != _SCHEME:
        return False
    given = header[len(_SCHEME) :].strip().encode()
    return hmac.compare_digest(given, token.encode())
