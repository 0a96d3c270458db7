"""The activities of the photo examples. A real system would call S3 and an image
library; these pretend, so the examples run anywhere."""

from __future__ import annotations

import threading
from typing import Any

from whimbrel import ActivityRun

#: Set by run.py to show a failure, then a fix and a redrive.
PUBLISH_IS_DOWN = [False]
THUMBNAILS_MADE: list[str] = []
_LOCK = threading.Lock()


class UnsupportedImage(Exception):
    """Listed as non_retryable in thumbnails.yaml: fails the item at once."""


def list_images(run: ActivityRun) -> dict[str, Any]:
    """An S3-style listing: ``{"bucket", "keys": [...]}``; the images the input calls
    ``broken`` are listed as ``.tif`` files."""
    count, broken = int(run.input.get("count", 5)), set(run.input.get("broken", []))
    return {"bucket": run.input.get("bucket", "photos"),
            "keys": [f"img/{i:04d}.{'tif' if i in broken else 'jpg'}" for i in range(count)]}


def thumbnail(run: ActivityRun) -> dict[str, Any]:
    key = run.input  # a map item's input is its element: one key of the listing
    if not key.endswith(".jpg"):
        raise UnsupportedImage(f"{key} (item {run.item_index}): not a JPEG")
    with _LOCK:
        THUMBNAILS_MADE.append(key)
    return {"source": key, "thumbnail": key.replace("img/", "thumbs/")}


def alert(run: ActivityRun) -> dict[str, Any]:
    """A failure handler: its input is the failure it handles."""
    return {"alerted": f"{run.input['activity']} {run.input['state']}: {run.input['error']}"}


def report(run: ActivityRun) -> dict[str, Any]:
    made = run.upstream["thumbnail"]
    if isinstance(made, dict) and "alerted" in made:  # alert's output stands in
        return {"thumbnails": 0, "alert": made["alerted"]}
    return {"thumbnails": sum(1 for m in made if m), "failed": made.count(None)}


def prepare(run: ActivityRun) -> dict[str, Any]:
    return {"album": run.input.get("album", "untitled")}


def publish(run: ActivityRun) -> dict[str, Any]:
    if PUBLISH_IS_DOWN[0]:
        raise ConnectionError("the publishing service is down")
    child = run.upstream["thumbnails"]  # the child run's sinks' outputs, by name
    return {"published": run.input.get("album", "untitled"), **child["report"]}
