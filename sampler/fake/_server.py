"""`FakeProvider`: the ASGI app served by hypercorn on a loopback socket, in a thread of its own."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Literal

from ._app import ProviderApp, ScriptBook, Settings
from ._auth import TokenBook, TokenExpiry
from ._decide import FaultDecider
from ._overflow import OverflowStyle
from ._ratelimit import RateLimit
from ._serving import ServingThread
from ._stats import ProviderStats, StatsCounter
from .faults import FaultPlan
from .script import Script

__all__ = ["FakeProvider", "FakeProviderError", "serve_forever"]

_State = Literal["new", "running", "stopped"]
# How long stop() lets open responses end on their own before cancelling them.
_GRACE_SECONDS = 0.5


class FakeProviderError(Exception):
    """The provider could not start, or did not stop, within its deadline."""


class FakeProvider:
    """An OpenAI- and Anthropic-compatible model provider on a real loopback socket.

    It answers from `script` (default: echo), or from the script in `scripts` that a `[[script:NAME]]`
    directive in the conversation names, and injects the faults `faults` decides. Behaviour knobs:

    - `chunk_chars`: characters per streamed text or argument chunk.
    - `context_window`: tokens (chars / 4 of the request); a larger prompt gets a 400 overflow error,
      worded as `overflow_style` says (default: the wire's own provider).
    - `max_body_bytes`: a larger body gets 413, as an nginx HTML page (`too_large_style="html"`) or
      the wire's JSON error (`"json"`).
    - `max_images`: a request with more image parts gets a 400 "invalid image" error (0 rejects any).
    - `token_expiry`: access tokens wear out after some requests (see `TokenExpiry`).
    - `require_key`: refuse model calls without a credential (401), as hosted providers do; always on
      with `token_expiry`. Without either, calls need no key, as a local server.
    - `events_per_write`: stream events coalesced into one HTTP chunk (1 = one chunk per event).
    - `rate_limit`: requests and tokens per minute, refused with 429 and Retry-After beyond them, with
      OpenAI's and Anthropic's rate-limit headers on every answer (see `RateLimit`).
    - `strict_history`: refuse a history with a tool call without its result, a result without its call,
      or an empty image (400, in the wire's provider's words); `alternate_roles` also refuses two user or
      two assistant messages in a row (DeepSeek's reasoner's rule and words; OpenAI wire only).

    `start()` returns once the socket listens; `stop()` returns once the server thread has ended. Both
    are safe to call from any thread but the provider's own; a stopped provider cannot start again. Use
    it as a context manager to get both.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        scripts: Mapping[str, Script] | None = None,
        faults: FaultPlan | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "fake-model",
        chunk_chars: int = 4,
        context_window: int | None = None,
        overflow_style: OverflowStyle | None = None,
        max_body_bytes: int | None = None,
        too_large_style: Literal["html", "json"] = "html",
        max_images: int | None = None,
        token_expiry: TokenExpiry | None = None,
        require_key: bool = False,
        events_per_write: int = 1,
        strict_history: bool = False,
        alternate_roles: bool = False,
        rate_limit: RateLimit | None = None,
    ) -> None:
        if chunk_chars < 1 or events_per_write < 1:
            raise ValueError("chunk_chars and events_per_write must be at least 1")
        if context_window is not None and context_window < 1:
            raise ValueError(f"context_window must be positive, got {context_window}")
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._scripts = ScriptBook(script or Script.echo(), scripts or {})
        self._stats = StatsCounter()
        settings = Settings(
            model=model,
            chunk_chars=chunk_chars,
            context_window=context_window,
            overflow_style=overflow_style,
            max_body_bytes=max_body_bytes,
            too_large_style=too_large_style,
            max_images=max_images,
            events_per_write=events_per_write,
            strict_history=strict_history,
            alternate_roles=alternate_roles,
            rate_limit=rate_limit,
        )
        self._app = ProviderApp(
            settings,
            self._scripts,
            FaultDecider(faults or FaultPlan.none()),
            TokenBook(token_expiry, require_key=require_key or token_expiry is not None),
            self._stats,
        )
        self._state: _State = "new"
        self._lock = threading.Lock()
        self._serving: ServingThread | None = None

    @property
    def port(self) -> int:
        """The port the provider listens on. Raises FakeProviderError before `start()`."""
        if self._port is None:
            raise FakeProviderError("the provider has not been started")
        return self._port

    @property
    def root_url(self) -> str:
        """The server's root, e.g. "http://127.0.0.1:PORT" (Anthropic SDKs take this as base URL)."""
        host = f"[{self._host}]" if ":" in self._host else self._host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL, e.g. "http://127.0.0.1:PORT/v1"."""
        return self.root_url + "/v1"

    @property
    def token_url(self) -> str:
        """The OAuth-style refresh endpoint, "ROOT/oauth/token"."""
        return self.root_url + "/oauth/token"

    @property
    def stats(self) -> ProviderStats:
        """A consistent snapshot of the counters."""
        return self._stats.snapshot()

    @property
    def running(self) -> bool:
        """Whether the provider has started and not yet stopped."""
        return self._state == "running"

    def register_script(self, name: str, script: Script) -> None:
        """Make `script` selectable by a `[[script:NAME]]` directive, also while running."""
        self._scripts.register(name, script)

    def start(self, timeout: float = 5.0) -> FakeProvider:
        """Bind, serve, and return once the socket accepts connections.

        Raises FakeProviderError if it was started before, or cannot listen within `timeout` seconds
        (OSError if the port cannot be bound).
        """
        with self._lock:
            if self._state != "new":
                raise FakeProviderError(f"a provider starts once; this one is {self._state}")
            listener = _listen(self._host, self._requested_port)
            self._port = listener.getsockname()[1]
            serving = ServingThread(
                self._app,
                listener,
                name=f"fake-provider:{self._port}",
                grace=_GRACE_SECONDS,
            )
            self._serving = serving
            self._state = "running"
        if not serving.start(timeout):
            self.stop(timeout)
            raise FakeProviderError(f"the provider did not start within {timeout} s") from serving.failure
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """End every open response, close the socket, and join the server thread. Idempotent.

        Raises FakeProviderError if the thread has not ended within `timeout` seconds, or if called
        from the provider's own thread.
        """
        with self._lock:
            if self._state != "running":
                self._state = "stopped"
                return
            self._state = "stopped"
            serving = self._serving
        assert serving is not None
        try:
            ended = serving.stop(timeout)
        except RuntimeError as exc:
            raise FakeProviderError("the provider cannot be stopped from its own thread") from exc
        if not ended:
            raise FakeProviderError(f"the provider thread did not end within {timeout} s")

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = f" on {self.root_url}" if self._port is not None else ""
        return f"<FakeProvider {self._state}{where}>"


def serve_forever(
    port: int = 0,
    profile: str = "none",
    seed: int = 0,
    *,
    host: str = "127.0.0.1",
    script: Script | None = None,
    on_ready: Callable[[FakeProvider], None] | None = None,
    provider: FakeProvider | None = None,
) -> ProviderStats:
    """Run a provider with the named fault profile until KeyboardInterrupt, then stop it cleanly.

    With `provider` (not started), that provider is served instead, and `port`, `profile`, `seed`, `host`
    and `script` are its own business. `on_ready` is called with the running provider (to print its URL,
    say); a KeyboardInterrupt it raises stops the provider like Ctrl-C does. Returns the final stats.
    Raises ValueError for an unknown profile.
    """
    if provider is None:
        provider = FakeProvider(script, faults=FaultPlan.profile(profile, seed=seed), host=host, port=port)
    with provider:
        try:
            if on_ready is not None:
                on_ready(provider)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return provider.stats


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # An explicit IPPROTO_TCP makes asyncio set TCP_NODELAY on accepted connections; without it, each
    # small response waits out the peer's delayed ACK (~40 ms).
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(2048)
        listener.setblocking(False)
    except BaseException:
        listener.close()
        raise
    return listener
