"""The console shows a subagent's session under the session whose call ran it, and the parent's turn says
when each subagent started and how it ended (a real browser against a real server)."""

from __future__ import annotations

from pathlib import Path

from sampler.fake import FakeProvider
from tests.shell.serve._server import TOKEN, running
from tests.shell.serve.test_console import _WAIT, browser  # noqa: F401 - the fixture
from tests.shell.subagents._family import Requests


def test_children_are_listed_under_their_parent_and_its_turn_tells_of_them(browser, tmp_path: Path) -> None:  # noqa: F811
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    with FakeProvider(Requests().script) as provider, running(provider, tmp_path) as (server, client):
        client.post("/v1/sessions", json={"workspace": "w", "id": "p"})
        wait = WebDriverWait(browser, _WAIT, ignored_exceptions=(StaleElementReferenceException,))
        css = By.CSS_SELECTOR
        browser.get(f"{server.url}/#token={TOKEN}")
        wait.until(ready.element_to_be_clickable((css, '#sessions li[data-id="p"]'))).click()
        wait.until(ready.element_to_be_clickable((By.ID, "send")))
        browser.find_element(By.ID, "prompt").send_keys("fan general:a general:b")
        browser.find_element(By.ID, "send").click()
        wait.until(ready.presence_of_element_located((css, '.turn-end[data-type="turn_completed"]')))
        notices = [n.text for n in browser.find_elements(css, ".event.subagent")]
        children = [c.id for c in server.context.host.store.children("p")]

        def listed(b):
            items = b.find_elements(css, "#sessions li")
            return [(i.get_attribute("data-id"), i.get_attribute("data-depth")) for i in items]

        wait.until(lambda b: len(listed(b)) == 3)
        order = listed(browser)
        child_text = browser.find_element(css, f'#sessions li[data-id="{children[0]}"]').text
    assert order[0] == ("p", None)
    assert sorted(order[1:]) == sorted((child, "1") for child in children)
    assert "subagent (general) of p, turn 1" in child_text
    assert sum("started" in n for n in notices) == 2 and sum("completed" in n for n in notices) == 2
