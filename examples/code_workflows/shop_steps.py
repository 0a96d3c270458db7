"""The steps of the code-workflow examples: python activities (one ActivityRun each),
in a module of their own so that any process can import them by name."""

from __future__ import annotations

import threading
from typing import Any

_polls: dict[str, int] = {}
_lock = threading.Lock()


class CardDeclined(Exception):
    """The payment provider said no."""


def check_job(run: Any) -> dict[str, Any]:
    """A job that is done on its third look."""
    with _lock:
        _polls[run.input["job"]] = seen = _polls.get(run.input["job"], 0) + 1
    return {"job": run.input["job"], "done": seen >= 3, "looks": seen}


def book_flight(run: Any) -> dict[str, Any]:
    return {"flight": f"LH-{run.input['trip']}"}


def book_hotel(run: Any) -> dict[str, Any]:
    return {"hotel": f"H-{run.input['trip']}"}


def charge_card(run: Any) -> dict[str, Any]:
    if run.input["eur"] > 1000:
        raise CardDeclined(f"card declined for {run.input['eur']} EUR")
    return {"charged": run.input["eur"]}


def cancel_hotel(run: Any) -> dict[str, Any]:
    return {"cancelled": run.input["hotel"]}


def cancel_flight(run: Any) -> dict[str, Any]:
    return {"cancelled": run.input["flight"]}


def ship(run: Any) -> dict[str, Any]:
    return {"shipped": run.input["order"], "approved_by": run.input["approved_by"]}


def hold_seats(run: Any) -> dict[str, Any]:
    return {"hold": f"{run.input['show']}/{run.input['seats']}"}


def release_seats(run: Any) -> dict[str, Any]:
    return {"released": run.input["hold"]}
