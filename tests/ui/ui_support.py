"""Helpers for the console's tests and screenshots: the console on a thread against
DynamoDB Local, and headless Chromium from Debian's packages driven by Selenium.

Imported as a plain module (``tests/`` has no packages); ``screenshots.py`` puts this
folder on ``sys.path`` itself.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from whimbrel import Whimbrel
from whimbrel.ui import ConsoleServer, create_app

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: This machine's network is closed: without these flags Chromium stalls on start-up
#: calls home.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars", "--lang=en-US")
TOKEN = "console-test-token-" + "x" * 24

#: The tint each state fills its DAG node with (static/console.css), as Chromium
#: reports a computed fill.
FILL = {
    "NONE": "rgb(255, 255, 255)",
    "REQUESTED": "rgb(241, 245, 249)",
    "READY": "rgb(236, 254, 255)",
    "RUNNING": "rgb(239, 246, 255)",
    "COMPLETED": "rgb(240, 253, 244)",
    "FAILED": "rgb(254, 242, 242)",
    "CANCELLED": "rgb(243, 244, 246)",
}


@contextmanager
def chromium(width: int = 1440, height: int = 1000) -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile, removed afterwards."""
    profile = tempfile.mkdtemp(prefix="whimbrel-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                 f"--window-size={width},{height}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Console:
    wb: Whimbrel
    server: ConsoleServer

    def url(self, path: str = "/") -> str:
        return f"{self.server.url}{path}"

    def sign_in_url(self, path: str = "/runs") -> str:
        return f"{self.server.url}{path}?token={TOKEN}"


@contextmanager
def console(wb: Whimbrel, *, refresh_seconds: float = 0.5, open_reads: bool = True,
            host: str = "127.0.0.1", page_size: int = 50,
            counts_ttl: float = 0.0) -> Iterator[Console]:
    """The console for ``wb`` on a free loopback port, on a thread. Counts are read
    afresh on every request unless ``counts_ttl`` says otherwise: the tests look at
    them right after changing runs."""
    app = create_app(wb, token=TOKEN, open_reads=open_reads,
                     refresh_seconds=refresh_seconds, page_size=page_size,
                     counts_ttl=counts_ttl)
    server = ConsoleServer(app, host=host, port=0).start()
    try:
        yield Console(wb, server)
    finally:
        server.stop()


def wait_for(driver: WebDriver, what: Callable[[WebDriver], Any], message: str,
             timeout: float = 20.0) -> Any:
    """Poll the page until ``what`` returns something truthy (Selenium polls with a
    deadline; nothing here sleeps a fixed time). Live parts of a page are replaced
    while we look, so an element gone stale just means "look again"."""
    return WebDriverWait(driver, timeout, poll_frequency=0.1,
                         ignored_exceptions=(StaleElementReferenceException,)
                         ).until(what, message)


# Live regions are swapped every refresh: read them in one script call, never through
# an element handle that the next swap makes stale.

def text(driver: WebDriver, css: str) -> str:
    """The visible text of the first element matching ``css`` ("" if none)."""
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "return e ? (e.innerText !== undefined ? e.innerText : e.textContent) : ''", css)
    return str(found)


def node_fill(driver: WebDriver, activity: str) -> str:
    """The colour a person sees inside an activity's node ("" if there is no node)."""
    fill = driver.execute_script(
        "const e = document.querySelector(`svg.dag g.node[data-activity=\"${arguments[0]}\"]"
        " rect.box`); return e ? getComputedStyle(e).fill : ''", activity)
    return str(fill)


def click(driver: WebDriver, by: str, value: str, message: str = "") -> None:
    """Click an element, looking it up again if a live refresh replaced it meanwhile."""
    def attempt(d: WebDriver) -> bool:
        d.find_element(by, value).click()
        return True
    wait_for(driver, attempt, message or f"could not click {value!r}")


def node_x(driver: WebDriver, activity: str) -> float:
    return float(node(driver, activity).rect["x"])


def node(driver: WebDriver, activity: str) -> WebElement:
    return driver.find_element(By.CSS_SELECTOR, f'svg.dag g.node[data-activity="{activity}"]')


def shoot(driver: WebDriver, url: str, path: Path, *, height: int | None = None) -> Path:
    """A PNG of the page at ``url``, as tall as its content (or ``height``)."""
    driver.get(url)
    wait_for(driver, lambda d: d.execute_script("return document.readyState") == "complete",
             "page did not load")
    # The runs page's counts load in their own fragment, after the page.
    wait_for(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, "#runs-counts.loading"),
             "the counts never loaded")
    full = int(driver.execute_script("return document.documentElement.scrollHeight"))
    width = int(driver.execute_script("return window.innerWidth"))
    driver.set_window_size(width, height or min(max(full, 600), 2400))
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path
