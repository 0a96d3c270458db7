"""The console in a real browser: headless Chromium (Debian's package) driven by
Selenium, against the console on a thread and DynamoDB Local.

Each test asserts what a person sees: rows appearing, nodes changing colour while the
page refreshes itself, a confirmation before an action, a refusal without the token.
One browser serves the whole module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from ui_support import (
    FILL,
    Console,
    chromium,
    click,
    console,
    node_fill,
    node_x,
    shoot,
    text,
    wait_for,
)

from whimbrel import (
    ActivityDefinition,
    LauncherSpec,
    RetryPolicy,
    Whimbrel,
    WorkflowDefinition,
    WorkflowState,
)
from whimbrel.testing import fresh_table_prefix

EXT = LauncherSpec.external()
PIPELINE = WorkflowDefinition("pipeline", (
    ActivityDefinition("extract", launcher=EXT),
    ActivityDefinition("clean", ("extract",), launcher=EXT),
    ActivityDefinition("enrich", ("extract",), launcher=EXT,
                       retry=RetryPolicy(max_attempts=2, initial_interval_seconds=3600)),
    ActivityDefinition("load", ("clean", "enrich"), launcher=EXT),
), description="extract, clean and enrich side by side, load")


@pytest.fixture(scope="module")
def ui(module_ddb_endpoint: str) -> Iterator[tuple[Console, WebDriver]]:
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix(),
                  actor="test")
    wb.create_tables()
    wb.register_workflow(PIPELINE)
    with console(wb) as con, chromium() as driver:
        yield con, driver
    wb.close()
    wb.store.delete_tables()


@pytest.fixture
def signed_in(ui: tuple[Console, WebDriver]) -> tuple[Console, WebDriver]:
    con, driver = ui
    driver.get(con.sign_in_url())
    # The token went into a cookie, and out of the address bar.
    assert driver.current_url == con.url("/runs")
    assert "Actions enabled" in driver.find_element(By.CSS_SELECTOR, ".env").text
    return con, driver


def step(wb: Whimbrel, wx: str, activity: str, *transitions: str) -> None:
    aeid = wb.get_workflow(wx).activity(activity).activity_exec_id
    for t in transitions:
        wb.transition_activity(aeid, t, error="enrich failed" if t == "FAILED" else None)


def test_runs_appear_and_nodes_change_colour_live(
        signed_in: tuple[Console, WebDriver]) -> None:
    con, driver = signed_in
    wb = con.wb
    # The list refreshes itself: a run started after the page loaded shows up in it.
    wx = wb.start_workflow("pipeline", {"day": "2026-11-21"})
    row = f'tr[data-run="{wx}"]'
    wait_for(driver, lambda d: text(d, row), "the new run never appeared in the list")
    assert "pipeline" in text(driver, row) and "RUNNING" in text(driver, row)
    # The counts load in their own fragment after the runs, and refresh with it.
    wait_for(driver, lambda d: (text(d, '.count[data-state="RUNNING"] .n') or "0") != "0",
             "the RUNNING count never counted the new run")

    click(driver, By.CSS_SELECTOR, f"{row} a")
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "svg.dag"), "no DAG drawn")
    assert driver.current_url == con.url(f"/runs/{wx}")
    driver.execute_script("window.__sameDocument = true")
    assert node_fill(driver, "extract") == FILL["READY"]
    assert node_fill(driver, "load") == FILL["REQUESTED"]

    def colour_becomes(activity: str, state: str) -> None:
        wait_for(driver, lambda d: node_fill(d, activity) == FILL[state],
                 f"{activity} never turned {state} on the page")

    step(wb, wx, "extract", "RUNNING")
    colour_becomes("extract", "RUNNING")
    step(wb, wx, "extract", "COMPLETED")
    colour_becomes("extract", "COMPLETED")
    colour_becomes("clean", "READY")
    step(wb, wx, "clean", "RUNNING", "COMPLETED")
    colour_becomes("clean", "COMPLETED")
    # enrich fails: its retry waits an hour, the run goes on RUNNING.
    step(wb, wx, "enrich", "RUNNING", "FAILED")
    colour_becomes("enrich", "REQUESTED")
    assert "try 2" in text(driver, 'svg.dag g.node[data-activity="enrich"]')
    failed_row = text(driver, 'tr[data-activity="enrich"][data-attempt="1"]')
    assert "FAILED" in failed_row and "enrich failed" in failed_row
    # All of that without reloading the page.
    assert driver.execute_script("return window.__sameDocument === true")


def test_a_live_run_page_says_when_it_stops_refreshing(
        ui: tuple[Console, WebDriver], ddb_endpoint: str) -> None:
    """Issue 20: when refreshes fail the page froze with no word of it."""
    _, driver = ui
    wb = Whimbrel(endpoint_url=ddb_endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    wb.register_workflow(PIPELINE)
    wx = wb.start_workflow("pipeline")
    with console(wb) as con:
        driver.get(con.url(f"/runs/{wx}"))
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "svg.dag"), "no DAG drawn")
        assert not driver.find_element(By.ID, "stale").is_displayed()
        wb.store.delete_tables()  # every refresh now fails
        wait_for(driver, lambda d: d.find_element(By.ID, "stale").is_displayed(),
                 "no warning while refreshes fail")
        said = driver.find_element(By.ID, "stale").text
        assert said.startswith("Not refreshed since ") and "may be out of date" in said
        assert "answered 503" in said or "answered 404" in said, said
    wb.close()


def test_retry_now_after_confirmation(signed_in: tuple[Console, WebDriver]) -> None:
    con, driver = signed_in
    wb = con.wb
    wx = wb.start_workflow("pipeline")
    step(wb, wx, "extract", "RUNNING", "COMPLETED")
    step(wb, wx, "enrich", "RUNNING", "FAILED")
    driver.get(con.url(f"/runs/{wx}"))
    click(driver, By.CSS_SELECTOR, 'tr[data-activity="enrich"][data-attempt="1"] a.btn')
    assert driver.find_element(By.TAG_NAME, "h1").text == "Retry now?"
    assert wb.get_workflow(wx).activity("enrich").state.value == "REQUESTED"  # not yet
    driver.find_element(By.ID, "confirm").click()
    wait_for(driver, lambda d: "Retry launched." in d.find_element(By.CLASS_NAME, "flash").text,
             "no confirmation of the retry")
    assert wb.get_workflow(wx).activity("enrich").state.value == "READY"
    assert node_fill(driver, "enrich") == FILL["READY"]


def test_cancel_asks_first_then_cancels(signed_in: tuple[Console, WebDriver]) -> None:
    con, driver = signed_in
    wb = con.wb
    wx = wb.start_workflow("pipeline")
    step(wb, wx, "extract", "RUNNING")
    driver.get(con.url(f"/runs/{wx}"))
    click(driver, By.LINK_TEXT, "Cancel run")
    assert driver.find_element(By.TAG_NAME, "h1").text == "Cancel run?"
    # Backing out changes nothing.
    driver.find_element(By.LINK_TEXT, "Keep it as it is").click()
    assert wb.get_workflow(wx).state is WorkflowState.RUNNING
    click(driver, By.LINK_TEXT, "Cancel run")
    driver.find_element(By.ID, "confirm").click()
    wait_for(driver, lambda d: d.find_elements(By.CLASS_NAME, "flash"), "no confirmation")
    assert "Cancellation requested." in driver.find_element(By.CLASS_NAME, "flash").text
    assert wb.get_workflow(wx).state is WorkflowState.CANCEL_REQUESTED
    # The running activity reports that it stopped: the page follows to CANCELLED.
    step(wb, wx, "extract", "COMPLETED")
    wait_for(driver, lambda d: d.execute_script(
        "return document.getElementById('run-live').dataset.state") == "CANCELLED",
        "the page never showed the run CANCELLED")
    assert not driver.find_elements(By.LINK_TEXT, "Cancel run")
    assert node_fill(driver, "clean") == FILL["CANCELLED"]


def test_an_action_without_the_token_is_refused(ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    wb = con.wb
    wx = wb.start_workflow("pipeline")
    driver.delete_all_cookies()
    driver.get(con.url(f"/runs/{wx}"))  # reads are open on loopback
    assert "Read-only" in driver.find_element(By.CSS_SELECTOR, ".env").text
    click(driver, By.LINK_TEXT, "Cancel run")
    assert "no console token" in driver.find_element(By.CLASS_NAME, "hint").text
    driver.find_element(By.ID, "confirm").click()
    wait_for(driver, lambda d: d.find_element(By.TAG_NAME, "h1").text == "Action refused",
             "the action was not refused")
    assert "console token" in driver.find_element(By.CLASS_NAME, "problem").text
    assert wb.get_workflow(wx).state is WorkflowState.RUNNING
    driver.get(con.url("/runs?token=wrong"))
    assert "wrong console token" in driver.find_element(By.TAG_NAME, "body").text


def test_definitions_and_screenshots(signed_in: tuple[Console, WebDriver],
                                     tmp_path: Path) -> None:
    con, driver = signed_in
    driver.get(con.url("/definitions"))
    row = driver.find_element(By.CSS_SELECTOR, 'tr[data-definition="pipeline"]')
    assert "v1" in row.text and "extract, clean and enrich" in row.text
    row.find_element(By.LINK_TEXT, "pipeline").click()
    names = {n.get_attribute("data-activity")
             for n in driver.find_elements(By.CSS_SELECTOR, "svg.dag g.node")}
    assert names == {"extract", "clean", "enrich", "load"}
    # Each edge points right: an activity sits left of everything that depends on it.
    x = {n: node_x(driver, n) for n in names}
    assert x["extract"] < x["clean"] == x["enrich"] < x["load"]
    driver.get(con.url("/rejections"))
    assert "No rejections" in driver.find_element(By.CLASS_NAME, "empty").text
    wx = con.wb.start_workflow("pipeline")
    shot = shoot(driver, con.url(f"/runs/{wx}"), tmp_path / "run.png", height=900)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
