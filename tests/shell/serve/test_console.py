"""The console in a real browser (headless Chromium driven by Selenium) against a real server: open a
session, watch an answer stream in, answer a permission prompt, see a restart count change; read a turn
with a tool call and a retry as words, at two widths, and again after a reload.

Screenshots go to ``tests/artifacts/console/`` (ignored by git): each width's view of the turn, and the
page as it was when a test failed."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from actors import ChaosPolicy
from sampler.fake import FakeProvider, Fault, FaultPlan, FinalAnswer, Script, ToolStep
from shell._protocol import GetHistory
from shell.config import ServeSettings
from shell.serve import start_server
from shell.session import SessionChaos
from shell.usage import Price
from tests.shell.serve._server import TOKEN, ask_for, running

REQUIRE_ENV = "REQUIRE_BROWSER_TESTS"
_WAIT = 20
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "console"
"""Where the screenshots go."""


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture
def browser(tmp_path) -> Iterator[object]:
    found = _binaries()
    if found is None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"a browser is required ({REQUIRE_ENV}=1) but chromium/chromedriver are missing")
        pytest.skip("chromium and chromedriver are not installed")
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1400,900",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=found[1]))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_console_drives_a_session_end_to_end(browser, tmp_path):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    tool = Script.task([ToolStep([("shell", {"command": "echo from-the-tool"})]), FinalAnswer("tool done")])
    chaos = SessionChaos(chat_state=ChaosPolicy(crash_probability=1.0, crash_on=(GetHistory,)))
    with (
        FakeProvider(Script.echo(chunks=12), scripts={"tool": tool}) as provider,
        running(provider, tmp_path, permissions=ask_for("shell"), chaos=chaos) as (server, _client),
    ):
        # The console redraws its lists as events arrive: an element found may be replaced before it is read.
        wait = WebDriverWait(browser, _WAIT, ignored_exceptions=(StaleElementReferenceException,))
        css = By.CSS_SELECTOR
        try:
            browser.get(f"{server.url}/#token={TOKEN}")
            wait.until(lambda b: "token=" not in b.current_url)  # taken out of the address bar
            browser.find_element(By.ID, "new-workspace").send_keys("proj")
            browser.find_element(By.ID, "new-session").click()
            selected = (css, "#sessions li.selected")
            session_id = wait.until(lambda b: b.find_element(*selected).get_attribute("data-id"))
            assert (tmp_path / "root" / "proj").is_dir()

            wait.until(ready.element_to_be_clickable((By.ID, "send")))
            browser.find_element(By.ID, "prompt").send_keys("hello browser")
            browser.find_element(By.ID, "send").click()
            wait.until(ready.presence_of_element_located((css, '.turn-end[data-type="turn_completed"]')))
            answer = browser.find_element(css, '.answer[data-turn="1"]')
            assert answer.find_element(css, ".text").text == "echo: hello browser"
            assert int(answer.get_attribute("data-deltas") or 0) >= 1  # it came as streamed text

            browser.find_element(By.ID, "prompt").send_keys("[[script:tool]] use the tool")
            browser.find_element(By.ID, "send").click()
            allow_once = (css, '.permission [data-decision="allow_once"]')
            allow = wait.until(ready.element_to_be_clickable(allow_once))
            assert "echo from-the-tool" in browser.find_element(css, ".permission code").text
            allow.click()
            second_end = (css, '.turn-end[data-type="turn_completed"][data-turn="2"]')
            wait.until(ready.presence_of_element_located(second_end))
            assert "from-the-tool" in browser.find_element(By.ID, "events").text
            lines = browser.find_elements(css, ".event")
            answer_at = next(i for i, n in enumerate(lines) if n.get_attribute("data-turn") == "2")
            tools = [i for i, n in enumerate(lines) if "tool" in n.get_attribute("class")]
            result_at = next(i for i in tools if "ok" in lines[i].text)
            assert answer_at > result_at  # the text the model wrote after the tool ran comes after it
            assert browser.find_elements(css, ".permission") == []

            chat_state = f'#tree [data-address="host/session/{session_id}/chat_state"] > .restarts'
            wait.until(ready.presence_of_element_located((css, chat_state)))
            wait.until(lambda b: b.find_element(css, chat_state).get_attribute("data-count") == "0")
            address = server.context.host.system.address(f"host/session/{session_id}/chat_state")
            with pytest.raises(Exception, match="injected crash"):
                address.ask(GetHistory(), timeout=5)
            wait.until(lambda b: b.find_element(css, chat_state).get_attribute("data-count") == "1")

            # A network drop: the server goes away and comes back on the same port; the console
            # reconnects by itself and resumes after the last event it had.
            host, port = server.context.host, server.port
            server.stop()
            offline = ("reconnecting", "offline")
            wait.until(lambda b: b.find_element(By.ID, "link").get_attribute("data-state") in offline)
            again = start_server(
                host, ServeSettings(port=port), token=TOKEN, workspace_root=tmp_path / "root"
            )
            try:
                with httpx.Client(base_url=again.url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
                    client.post(f"/v1/sessions/{session_id}/prompts", json={"text": "after the drop"})
                # The conversation still names the tool script: turn 3 asks again.
                wait.until(ready.element_to_be_clickable(allow_once)).click()
                third_end = (css, '.turn-end[data-type="turn_completed"][data-turn="3"]')
                wait.until(ready.presence_of_element_located(third_end))
                wait.until(lambda b: b.find_element(By.ID, "link").text == "connected")
                assert len(browser.find_elements(css, ".turn-end")) == 3  # nothing missed, nothing twice
                assert len(browser.find_elements(css, ".answer")) == 3
                third = browser.find_elements(css, '.answer[data-turn="3"] .text')[-1]
                assert third.text == "tool done"
            finally:
                again.stop()
        except BaseException:
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(ARTIFACTS / "end-to-end-failure.png"))
            raise


# What a person should never have to read: raw JSON and Python reprs.
_RAW = re.compile(r'\{"|\[\]|":|\b[A-Z][A-Za-z]+\(|<[^>]* object at ')
_VIEWS = ("sessions-pane", "events", "supervision-pane")
_FIRST_STEP = "First I look at the workspace."
_LAST_STEP = "All done: the listing is above."
_USAGE = re.compile(r"[\d,]+ in( \([\d,]+ cached\))? · [\d,]+ out tokens · \$\d+\.\d{4}")
_LONG_ARGUMENT = "echo " + "an-argument-without-any-space-" * 12


def _raw_bits(text: str) -> list[str]:
    return _RAW.findall(text)


def _clicked(browser, selector: str) -> bool:  # type: ignore[no-untyped-def]
    """Click the element ``selector`` finds, for a wait: False while it is missing or redrawn under us."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        browser.find_element(By.CSS_SELECTOR, selector).click()
    except (NoSuchElementException, StaleElementReferenceException):
        return False
    return True


def _overflowing(browser) -> list[str]:  # type: ignore[no-untyped-def]
    """The page and the main containers that are wider than their box (would scroll sideways)."""
    found: list[str] = browser.execute_script(
        """
        const wide = [];
        const root = document.documentElement;
        const page = root.scrollWidth, inner = window.innerWidth;
        if (page > inner) wide.push(`page ${page} > ${inner}`);
        const ids = ["sessions-pane", "session-pane", "supervision-pane", "events", "sessions", "tree"];
        for (const id of ids) {
          const box = document.getElementById(id);
          if (box.scrollWidth > box.clientWidth) wide.push(`${id} ${box.scrollWidth} > ${box.clientWidth}`);
        }
        return wide;
        """
    )
    return found


def test_the_console_reads_a_turn_as_words_at_two_widths_and_after_a_reload(browser, tmp_path):
    """A turn that retries a rate limit, writes text, calls a tool with a long argument and writes again:
    the timeline shows the prompt, the retry, the call with its arguments and result, both steps' text
    and the outcome with its usage in words; no view shows raw JSON or a repr; nothing scrolls sideways
    at 1400 and 800 px; a reload (which replays only stored events) still shows the whole turn's text;
    the status says "connected", stays so once the session is closed and its stream ends, and says
    "reconnecting" or "offline" after the server stops."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    work = Script.task(
        [ToolStep([("shell", {"command": _LONG_ARGUMENT})], text=_FIRST_STEP), FinalAnswer(_LAST_STEP)]
    )
    faults = FaultPlan.scripted([Fault.rate_limit(retry_after_ms=100)])
    session_id = "a-session-with-a-very-long-identifier-" + "x" * 26
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (
        FakeProvider(Script.echo(), scripts={"work": work}, faults=faults) as provider,
        running(provider, tmp_path, pricing={"fake-model": Price(2.0, 10.0)}) as (server, client),
    ):
        wait = WebDriverWait(browser, _WAIT, ignored_exceptions=(StaleElementReferenceException,))
        css = By.CSS_SELECTOR
        link = (By.ID, "link")
        try:
            created = client.post("/v1/sessions", json={"workspace": "proj", "id": session_id})
            assert created.status_code == 201
            browser.get(f"{server.url}/#token={TOKEN}")
            wait.until(lambda b: _clicked(b, f'#sessions li[data-id="{session_id}"]'))  # the list is redrawn
            wait.until(ready.element_to_be_clickable((By.ID, "send")))
            browser.find_element(By.ID, "prompt").send_keys("[[script:work]] list the workspace")
            browser.find_element(By.ID, "send").click()
            end = (css, '.turn-end[data-type="turn_completed"][data-turn="1"]')
            wait.until(ready.presence_of_element_located(end))
            wait.until(lambda b: "no usage yet" not in b.find_element(By.ID, "sessions").text)
            wait.until(lambda b: b.find_element(*link).text == "connected")
            for summary in browser.find_elements(css, "#events details > summary"):
                summary.click()  # long arguments and results are folded

            timeline = browser.find_element(By.ID, "events").text
            assert "list the workspace" in timeline  # the prompt
            assert re.search(r"rate limit \(HTTP 429\): attempt 2 of \d+ in", timeline), timeline
            tool = browser.find_element(css, "#events .tool")
            assert "shell" in tool.text and "command: " + _LONG_ARGUMENT in tool.text
            assert tool.find_element(css, ".result").text.strip(), "the tool's result is shown"
            assert _FIRST_STEP in timeline and _LAST_STEP in timeline
            outcome = browser.find_element(*end).text
            assert "Completed in 2 steps" in outcome
            assert _USAGE.search(outcome), outcome
            assert _USAGE.search(browser.find_element(By.ID, "sessions").text)
            for view in _VIEWS:
                text = browser.find_element(By.ID, view).text
                assert not _raw_bits(text), f"#{view} shows {_raw_bits(text)}: {text}"
            supervision = browser.find_element(By.ID, "supervision-pane").text
            assert "waiting [" not in supervision
            gate = browser.find_element(By.ID, "gate").text  # its budgets follow the provider's headers
            assert gate.startswith("idle No request in flight, none waiting"), gate
            assert "No restarts, crashes or dead letters." in supervision

            for width in (1400, 800):
                browser.set_window_size(width, 900)
                wait.until(lambda b, w=width: b.execute_script("return window.innerWidth") <= w)
                assert _overflowing(browser) == [], f"at {width} px"
                browser.save_screenshot(str(ARTIFACTS / f"turn-{width}px.png"))

            # A reload replays the stored events only (streamed text is not stored).
            browser.refresh()
            wait.until(ready.presence_of_element_located(end))
            replayed = browser.find_element(By.ID, "events").text
            assert _FIRST_STEP in replayed and _LAST_STEP in replayed, replayed
            assert replayed.index(_FIRST_STEP) < replayed.index("shell") < replayed.index(_LAST_STEP)
            assert not browser.find_elements(css, ".answer[data-deltas]"), "nothing was streamed this time"
            wait.until(lambda b: b.find_element(*link).text == "connected")

            # A closed session's stream ends for good: the console stays connected and stops following it.
            browser.execute_script(
                """
                window.linkSeen = []; window.refreshes = 0;
                const status = document.getElementById("link");
                new MutationObserver(() => window.linkSeen.push(status.textContent))
                  .observe(status, {childList: true, characterData: true, subtree: true});
                new MutationObserver(() => { window.refreshes += 1; })
                  .observe(document.getElementById("tree"), {childList: true});
                """
            )
            assert client.delete(f"/v1/sessions/{session_id}").status_code == 200
            closed = (css, f'#sessions li[data-id="{session_id}"][data-status="closed"]')
            wait.until(ready.presence_of_element_located(closed))
            wait.until(lambda b: b.execute_script("return window.refreshes") >= 3)  # a few polls later
            seen = browser.execute_script("return window.linkSeen")
            assert set(seen) <= {"connected"} and browser.find_element(*link).text == "connected", seen

            server.stop()
            wait.until(lambda b: b.find_element(*link).text in ("reconnecting", "offline"))
        except BaseException:
            browser.save_screenshot(str(ARTIFACTS / "turn-failure.png"))
            raise
