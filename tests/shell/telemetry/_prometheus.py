"""A throwaway Prometheus server for tests: Debian's ``prometheus`` on 127.0.0.1, scraping given targets.

:func:`prometheus_server` writes a configuration that scrapes each target every second into a temporary
directory, starts the server on a free loopback port with its database there, waits until it is ready and
yields its base URL; afterwards it stops the server (SIGTERM, then SIGKILL after a grace) and removes the
directory. When it cannot be started, :class:`PrometheusUnavailable` says why.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests._waiting import wait_until

__all__ = ["REQUIRE_ENV", "PrometheusUnavailable", "free_port", "prometheus_server"]

REQUIRE_ENV = "REQUIRE_PROMETHEUS_TESTS"
"""Set to ``1`` where the Prometheus test must run (CI): then a server that cannot start is a failure."""

_READY_WITHIN = 30.0


class PrometheusUnavailable(Exception):
    """No Prometheus server can be started here; the message says why."""


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def prometheus_server(targets: Sequence[str]) -> Iterator[str]:
    """A running Prometheus scraping ``targets`` (``host:port``) every second; yields its base URL."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise PrometheusUnavailable("the prometheus program is not installed (Debian package prometheus)")
    with tempfile.TemporaryDirectory(prefix="tk-prometheus-") as directory:
        root = Path(directory)
        listed = ", ".join(f'"{target}"' for target in targets)
        config = root / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            f"scrape_configs:\n  - job_name: turnkeep\n    static_configs:\n      - targets: [{listed}]\n"
        )
        port = free_port()
        log = (root / "prometheus.log").open("wb")
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(url, process, root / "prometheus.log")
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
            log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    def ready() -> bool:
        if process.poll() is not None:
            return True  # it will not become ready: say why below
        try:
            return httpx.get(url + "/-/ready", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    if not wait_until(ready, _READY_WITHIN):
        raise PrometheusUnavailable(f"prometheus was not ready within {_READY_WITHIN:g} s")
    if process.poll() is not None:
        raise PrometheusUnavailable(f"prometheus exited with {process.returncode}: {log.read_text()[-2000:]}")
