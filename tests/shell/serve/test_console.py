"""The console in a real browser (headless Chromium driven by Selenium) against a real server: open a
session, watch an answer stream in, answer a permission prompt, see a restart count change."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import httpx
import pytest

from actors import ChaosPolicy
from sampler.fake import FakeProvider, FinalAnswer, Script, ToolStep
from shell._protocol import GetHistory
from shell.config import ServeSettings
from shell.serve import start_server
from shell.session import SessionChaos
from tests.shell.serve._server import TOKEN, ask_for, running

REQUIRE_ENV = "REQUIRE_BROWSER_TESTS"
_WAIT = 20


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
            assert "token=" not in browser.current_url  # taken out of the address bar
            browser.find_element(By.ID, "new-workspace").send_keys("proj")
            browser.find_element(By.ID, "new-session").click()
            item = wait.until(ready.presence_of_element_located((css, "#sessions li.selected")))
            session_id = item.get_attribute("data-id")
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
            result_at = next(i for i, n in enumerate(lines) if "ok: from-the-tool" in n.text)
            assert answer_at > result_at  # the text the model wrote after the tool ran comes after it
            assert browser.find_elements(css, ".permission") == []

            chat_state = f'#tree [data-address="host/session/{session_id}/chat_state"] > .restarts'
            wait.until(ready.presence_of_element_located((css, chat_state)))
            assert browser.find_element(css, chat_state).get_attribute("data-count") == "0"
            address = server.context.host.system.address(f"host/session/{session_id}/chat_state")
            with pytest.raises(Exception, match="injected crash"):
                address.ask(GetHistory(), timeout=5)
            wait.until(lambda b: b.find_element(css, chat_state).get_attribute("data-count") == "1")

            # A network drop: the server goes away and comes back on the same port; the console
            # reconnects by itself and resumes after the last event it had.
            host, port = server.context.host, server.port
            server.stop()
            wait.until(lambda b: b.find_element(By.ID, "link").get_attribute("data-state") == "retrying")
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
                assert browser.find_element(By.ID, "link").get_attribute("data-state") == "live"
                assert len(browser.find_elements(css, ".turn-end")) == 3  # nothing missed, nothing twice
                assert len(browser.find_elements(css, ".answer")) == 3
                third = browser.find_elements(css, '.answer[data-turn="3"] .text')[-1]
                assert third.text == "tool done"
            finally:
                again.stop()
        except BaseException:
            browser.save_screenshot(str(tmp_path / "console-failure.png"))
            raise
