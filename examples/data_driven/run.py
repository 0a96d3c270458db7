"""Run the data-driven examples in this process (Full Logic API):

1. photo-thumbnails: a map over a listing of 30 images, 20 at a time; one bad image
   is tolerated (its place in the output is null);
2. the same with too many bad images: the map fails, its handler `alert` runs in its
   place and the report still goes out;
3. photo-album: a parent run whose `thumbnails` activity is a child run; its publisher
   is down, so the album FAILS; "fix" it, then redrive: only `publish` runs again, no
   thumbnail is made twice.

    cd examples/data_driven
    python run.py

or, with the CLI (PYTHONPATH=. so the python launcher finds the activities):

    whimbrel definitions register thumbnails.yaml && whimbrel definitions register album.yaml
    PYTHONPATH=. whimbrel submit photo-album --input '{"count": 30}' --wait
    whimbrel status RUN --expand thumbnail      # on the child run: one row per image
"""

from __future__ import annotations

import sys
from pathlib import Path

from whimbrel import Whimbrel, WorkflowDefinition

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))  # so the python launcher can import photo_activities

import photo_activities  # noqa: E402


def run(wb: Whimbrel) -> dict[str, object]:
    """The three scenarios on ``wb``; returns what each ended with."""
    for name in ("thumbnails.yaml", "album.yaml"):
        wb.register_workflow(WorkflowDefinition.from_file(HERE / name))
    out: dict[str, object] = {}

    ok = wb.wait(wb.start_workflow("photo-thumbnails", {"count": 30, "broken": [7]}),
                 timeout=120)
    out["thumbnails"] = (ok.state.value, ok.activity("report").output)
    print(f"1. {ok.state.value}: {ok.activity('report').output} "
          f"(map: {ok.activity('thumbnail').progress})")

    bad = wb.wait(wb.start_workflow("photo-thumbnails",
                                    {"count": 8, "broken": [1, 2, 3]}), timeout=120)
    out["handled"] = (bad.state.value, bad.activity("report").output)
    print(f"2. {bad.state.value}: {bad.activity('report').output}")

    photo_activities.PUBLISH_IS_DOWN[0] = True
    wx = wb.start_workflow("photo-album", {"album": "summer", "count": 12})
    failed = wb.wait(wx, timeout=120)
    made = len(photo_activities.THUMBNAILS_MADE)
    print(f"3. {failed.state.value}: {failed.error}")
    photo_activities.PUBLISH_IS_DOWN[0] = False  # "deploy the fix"
    wb.redrive_workflow(wx)
    album = wb.wait(wx, timeout=120)
    again = len(photo_activities.THUMBNAILS_MADE) - made
    out["album"] = (failed.state.value, album.state.value, album.activity("publish").output,
                    again)
    print(f"   redriven: {album.state.value}: {album.activity('publish').output} "
          f"(child run {album.child_workflow_exec_ids[0]}; thumbnails made again: {again})")
    return out


if __name__ == "__main__":
    with Whimbrel.from_env() as client:
        client.create_tables()
        run(client)
