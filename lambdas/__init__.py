"""Thin AWS Lambda handlers over :mod:`whimbrel.engine` (bundled by the CDK helper).

* ``workflow_request.handler`` — stream of ``workflow_request``: starts workflows.
* ``activity_event.handler`` — stream of ``activity_event``: applies transitions.
* ``heartbeat.handler`` — scheduled: one sweep (time-outs, due retries, reconcile).
* ``notify.handler`` — streams of ``workflow_exec``, ``activity_exec``, ``map_item``: events.
"""
