"""Sampler streaming: chunks/s and time to first token against the official openai client and raw httpx.

All three read the same embedded provider on 127.0.0.1, in a process of its own, in the same run; figures
are printed as ratios.
Run: ``.venv/bin/python bench/sampler_bench.py [--chunks N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import openai
import trio

from sampler import Completed, ModelRequest, SamplerSettings, StepText, UserMessage, http_client, sample_step


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []


_decoder = msgspec.json.Decoder(_Chunk)


def _body(prompt: str) -> dict[str, Any]:
    return {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": prompt}]}


def raw_httpx(base_url: str, prompt: str) -> tuple[int, float]:
    """Chunks read and seconds to the first content, with httpx and msgspec and nothing else."""
    count, first = 0, 0.0
    client = httpx.Client(timeout=60)  # made before the clock starts, as the other clients are
    started = time.perf_counter()
    with (
        client,
        client.stream(
            "POST", base_url + "/chat/completions", json=_body(prompt), headers={"authorization": "Bearer b"}
        ) as response,
    ):
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = _decoder.decode(line[6:])
            if chunk.choices and chunk.choices[0].delta.content:
                if not count:
                    first = time.perf_counter() - started
                count += 1
    return count, first


def official_openai(base_url: str, prompt: str) -> tuple[int, float]:
    """Chunks read and seconds to the first content, with the official client's streaming."""
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    count, first = 0, 0.0
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": prompt}], stream=True
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            if not count:
                first = time.perf_counter() - started
            count += 1
    client.close()
    return count, first


def turnkeep(base_url: str, prompt: str) -> tuple[int, float]:
    """Characters streamed and seconds to the first delta, through the sampler's retrying step."""
    result: dict[str, Any] = {}

    async def main() -> None:
        async with http_client(SamplerSettings(base_url=base_url)) as client:
            outcome = await sample_step(
                ModelRequest(model="fake-model", messages=(UserMessage.of_text(prompt),)),
                request_id="bench",
                client=client,
                settings=SamplerSettings(base_url=base_url, idle_timeout=60),
                emit=lambda event: None,
                api_key=lambda: "bench",
            )
        assert isinstance(outcome, Completed)
        result["text"] = outcome.message.text

    trio.run(main)
    return len(result["text"]), 0.0


def _timed(run: Any, url: str, prompt: str) -> float:
    started = time.perf_counter()
    count, _ = run(url, prompt)
    return float(count) / (time.perf_counter() - started)


def ttft_httpx(base_url: str, prompt: str, n: int) -> list[float]:
    """Seconds to the first content of ``n`` requests on one warm connection."""
    samples = []
    with httpx.Client(timeout=60) as client:
        for _ in range(n + 1):
            started = time.perf_counter()
            with client.stream(
                "POST",
                base_url + "/chat/completions",
                json=_body(prompt),
                headers={"authorization": "Bearer b"},
            ) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        chunk = _decoder.decode(line[6:])
                        if chunk.choices and chunk.choices[0].delta.content:
                            samples.append(time.perf_counter() - started)
    return samples[1:]


def ttft_async_httpx(base_url: str, prompt: str, n: int) -> list[float]:
    """Seconds to the first content of ``n`` requests with httpx's async client on trio (the sampler's
    own transport, without the sampler)."""
    samples: list[float] = []

    async def main() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            for _ in range(n + 1):
                started = time.perf_counter()
                async with client.stream(
                    "POST",
                    base_url + "/chat/completions",
                    json=_body(prompt),
                    headers={"authorization": "Bearer b"},
                ) as response:
                    async for line in response.aiter_lines():
                        if line.startswith("data: ") and line != "data: [DONE]":
                            chunk = _decoder.decode(line[6:])
                            if chunk.choices and chunk.choices[0].delta.content:
                                samples.append(time.perf_counter() - started)

    trio.run(main)
    return samples[1:]


def ttft_openai(base_url: str, prompt: str, n: int) -> list[float]:
    """Seconds to the first content of ``n`` requests with one official client."""
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    samples = []
    for _ in range(n + 1):
        started = time.perf_counter()
        stream = client.chat.completions.create(
            model="fake-model", messages=[{"role": "user", "content": prompt}], stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                samples.append(time.perf_counter() - started)
                break
        stream.close()
    client.close()
    return samples[1:]


def ttft_turnkeep(base_url: str, prompt: str, n: int) -> list[float]:
    """Seconds to the first delta of ``n`` sampler steps with one warm client."""
    samples: list[float] = []

    async def main() -> None:
        async with http_client(SamplerSettings(base_url=base_url)) as client:
            for _ in range(n + 1):
                started = time.perf_counter()
                first: list[float] = []

                def emit(event: Any, started: float = started, first: list[float] = first) -> None:
                    if not first and isinstance(event, StepText):
                        first.append(time.perf_counter() - started)

                await sample_step(
                    ModelRequest(model="fake-model", messages=(UserMessage.of_text(prompt),)),
                    request_id="bench",
                    client=client,
                    settings=SamplerSettings(base_url=base_url, idle_timeout=60),
                    emit=emit,
                    api_key=lambda: "bench",
                )
                samples.append(first[0])

    trio.run(main)
    return samples[1:]


_SERVE = """
import sys
from sampler.fake import FakeProvider, Script
chunks = int(sys.argv[1])
scripts = {"long": Script.text("x" * chunks, chunks=chunks), "short": Script.text("hi", chunks=1)}
with FakeProvider(scripts["long"], scripts=scripts, chunk_chars=1) as provider:
    print(provider.base_url, flush=True)
    sys.stdin.read()
"""


@contextlib.contextmanager
def _provider_process(chunks: int) -> Iterator[str]:
    """The embedded provider in a process of its own, so that the clients measured do not share the
    interpreter (and its lock) with the server; yields its base URL and ends the process afterwards."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(chunks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the provider process did not start (it printed {url!r})")
        yield url
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with _provider_process(args.chunks) as url:
        runners = {"turnkeep": turnkeep, "openai": official_openai, "httpx": raw_httpx}
        first_runners = {
            "turnkeep": ttft_turnkeep,
            "openai": ttft_openai,
            "httpx": ttft_httpx,
            "async_httpx": ttft_async_httpx,
        }
        rates: dict[str, list[float]] = {name: [] for name in runners}
        ttft: dict[str, list[float]] = {name: [] for name in first_runners}
        for _ in range(args.rounds):
            for name, run in runners.items():
                rates[name].append(_timed(run, url, "stream [[script:long]]"))
            for name, measure in first_runners.items():
                ttft[name].extend(measure(url, "[[script:short]]", 20))
    rate = {name: statistics.median(values) for name, values in rates.items()}
    first = {name: statistics.median(values) * 1000 for name, values in ttft.items()}
    print(f"{'benchmark':<36} {'value':>14} {'ratio':>7}  target")
    print(f"{'sampler chunks/s':<36} {rate['turnkeep']:>14,.0f}")
    print(
        f"{'  vs official openai client':<36} {rate['openai']:>14,.0f} "
        f"{rate['turnkeep'] / rate['openai']:>7.2f}  >= 5.0"
    )
    print(
        f"{'  vs raw httpx + msgspec':<36} {rate['httpx']:>14,.0f} "
        f"{rate['turnkeep'] / rate['httpx']:>7.2f}  >= 0.6"
    )
    print(f"{'time to first token (ms, median)':<36} {first['turnkeep']:>14.2f}")
    print(
        f"{'  vs raw httpx':<36} {first['httpx']:>14.2f} {first['turnkeep'] / first['httpx']:>7.2f}  <= 1.2"
    )
    async_ratio = first["turnkeep"] / first["async_httpx"]
    print(f"{'  vs raw async httpx on trio':<36} {first['async_httpx']:>14.2f} {async_ratio:>7.2f}")
    print(f"{'  (official openai client)':<36} {first['openai']:>14.2f}")


if __name__ == "__main__":
    main()
