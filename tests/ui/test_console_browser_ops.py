"""Issue 30's console pages in headless Chromium: what one page load of the runs list
costs in DynamoDB requests (through the store's meter), starting a run from the form,
search by run id, the pools page, a schedule paused, resumed and fired, and a QUEUED
run shown as waiting with every state in the graph's legend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select
from test_console_cost import COUNTS_BUDGET, PAGE_BUDGET
from ui_support import Console, chromium, click, console, text, wait_for

from whimbrel import ActivityDefinition, LauncherSpec, Whimbrel, WorkflowDefinition
from whimbrel.testing import fresh_table_prefix
from whimbrel.ui import counts

EXT = LauncherSpec.external()


@pytest.fixture(scope="module")
def ui(module_ddb_endpoint: str) -> Iterator[tuple[Console, WebDriver]]:
    wb = Whimbrel(endpoint_url=module_ddb_endpoint, table_prefix=fresh_table_prefix())
    wb.create_tables()
    for i in range(12):
        wb.register_workflow(WorkflowDefinition(f"flow_{i:02d}", (
            ActivityDefinition("w", launcher=EXT),)))
    wb.register_workflow(WorkflowDefinition("capped", (
        ActivityDefinition("w", launcher=EXT),), max_running=1))
    for i in range(60):
        wb.start_workflow(f"flow_{i % 12:02d}", {"i": i})
    # No live refresh during the test (it would add its requests to the count); the
    # counts are kept as in production.
    with console(wb, refresh_seconds=3600, counts_ttl=counts.COUNTS_TTL) as con, \
            chromium() as driver:
        driver.get(con.sign_in_url())
        yield con, driver
    wb.close()
    wb.store.delete_tables()


def requests(wb: Whimbrel) -> int:
    return sum(wb.meter.calls.values())


def test_a_page_load_costs_a_bounded_number_of_requests(
        ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    wb = con.wb
    wb.meter.reset()
    driver.get(con.url("/runs"))
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#runs-counts[data-loaded]"),
             "the counts never loaded")
    assert len(driver.find_elements(By.CSS_SELECTOR, "tr[data-run]")) == 50
    assert text(driver, '.count[data-state="RUNNING"] .n') == "60"
    first = requests(wb)
    assert first <= PAGE_BUDGET + COUNTS_BUDGET, dict(wb.meter.calls)
    # Loaded again within the counts' minute: only the page of runs is read.
    wb.meter.reset()
    driver.refresh()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#runs-counts[data-loaded]"),
             "the counts never loaded")
    again = requests(wb)
    assert again <= PAGE_BUDGET, dict(wb.meter.calls)
    print(f"\nrequests per load in Chromium: first {first}, again {again}")


def test_start_a_run_from_the_form(ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    driver.get(con.url("/runs"))
    click(driver, By.ID, "start-run")
    Select(driver.find_element(By.NAME, "workflow")).select_by_value("flow_03")
    box = driver.find_element(By.NAME, "input")
    box.send_keys('{"day": 2026-11-21}')  # not JSON
    driver.find_element(By.ID, "start").click()
    wait_for(driver, lambda d: "not valid JSON" in text(d, "#problem"),
             "a bad input was not explained")
    box = driver.find_element(By.NAME, "input")
    assert box.get_attribute("value") == '{"day": 2026-11-21}'  # kept
    box.clear()
    box.send_keys('{"day": "2026-11-21"}')
    driver.find_element(By.ID, "start").click()
    wait_for(driver, lambda d: "Run started." in text(d, ".flash"), "no run page")
    wx = driver.current_url.split("/runs/")[1].split("?")[0]
    wf = con.wb.get_workflow(wx)
    assert wf.workflow_name == "flow_03" and wf.input == {"day": "2026-11-21"}


def test_search_by_run_id(ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    wx = con.wb.start_workflow("flow_01", {"find": "me"})
    driver.get(con.url("/definitions"))
    search = driver.find_element(By.NAME, "q")
    search.send_keys(wx, Keys.ENTER)
    wait_for(driver, lambda d: d.current_url == con.url(f"/runs/{wx}"), "search went nowhere")
    assert wx in text(driver, ".run-head")


def test_the_pools_page(ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    con.wb.set_pool("browser-pool", slots=3, per_second=None)
    driver.get(con.url("/runs"))
    click(driver, By.LINK_TEXT, "Pools")
    wait_for(driver, lambda d: text(d, 'tr[data-pool="browser-pool"]'), "no pool row")
    assert text(driver, 'tr[data-pool="browser-pool"] td[data-slots]') == "3"
    assert text(driver, 'tr[data-pool="browser-pool"] td[data-held]') == "0"


def test_pause_resume_and_fire_a_schedule(ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    wb = con.wb
    wb.create_schedule("browser-sched", "flow_02", every_seconds=3600,
                       attributes={"via": "fire-now"})
    driver.get(con.url("/schedules"))
    row = 'tr[data-schedule="browser-sched"]'
    click(driver, By.CSS_SELECTOR, f'{row} button[data-verb="pause"]')
    wait_for(driver, lambda d: "Schedule browser-sched paused." in text(d, ".flash"),
             "pause said nothing")
    assert "PAUSED" in text(driver, row) and wb.get_schedule("browser-sched").status == "PAUSED"
    click(driver, By.CSS_SELECTOR, f'{row} button[data-verb="resume"]')
    wait_for(driver, lambda d: "resumed" in text(d, ".flash"), "resume said nothing")
    assert wb.get_schedule("browser-sched").status == "ACTIVE"
    click(driver, By.CSS_SELECTOR, f'{row} button[data-verb="fire"]')
    wait_for(driver, lambda d: "fired" in text(d, ".flash"), "fire now said nothing")
    assert len(wb.list_workflows(attributes={"via": "fire-now"}).items) == 1
    wb.delete_schedule("browser-sched")


def test_a_queued_run_waits_and_the_legend_has_every_state(
        ui: tuple[Console, WebDriver]) -> None:
    con, driver = ui
    con.wb.start_workflow("capped")
    queued = con.wb.start_workflow("capped")
    driver.get(con.url(f"/runs/{queued}"))
    said = text(driver, ".run-head .sub")
    assert "waiting to start" in said and "max_running" in said and "running for" not in said
    legend = text(driver, ".legend")
    for word in ("skipped", "preparing", "lost", "timed out", "not started"):
        assert word in legend, legend
