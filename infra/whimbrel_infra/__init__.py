"""AWS CDK v2 construct and app that deploy Whimbrel.

Public names: :class:`Whimbrel` (the reusable L3 construct), :class:`WhimbrelProps`,
:class:`WhimbrelStack` and :func:`build_app` (what ``infra/app.py`` runs).
"""

from .application import build_app, props_from_context
from .construct import Whimbrel
from .props import WhimbrelProps
from .stack import WhimbrelStack

__all__ = ["Whimbrel", "WhimbrelProps", "WhimbrelStack", "build_app", "props_from_context"]
