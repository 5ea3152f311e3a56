"""Where a provider's endpoint is, given the base URL a user wrote in either convention."""

from __future__ import annotations

import urllib.parse

__all__ = ["endpoint_url"]


def endpoint_url(base_url: str, path: str) -> str:
    """The URL of ``path`` (such as ``/chat/completions``) under ``base_url``.

    Both conventions are accepted: a base URL that names the API version (``https://api.openai.com/v1``,
    ``https://openrouter.ai/api/v1``, ``…/v1beta/openai``) is used as it is; a bare origin
    (``https://api.anthropic.com``, the Anthropic SDK's convention, or ``http://localhost:11434``) gets
    ``/v1`` added first. Trailing slashes never double. Query strings (Azure's ``api-version``) are kept.
    """
    parts = urllib.parse.urlsplit(base_url.strip())
    prefix = parts.path.rstrip("/")
    if not prefix:
        prefix = "/v1"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, prefix + path, parts.query, parts.fragment))
