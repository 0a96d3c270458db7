"""The web console (``whimbrel ui``; docs/console.md).

Needs the ``ui`` extra (``pip install 'whimbrel[ui]'``): Starlette, Jinja2, uvicorn.
"""

from whimbrel.ui.app import create_app
from whimbrel.ui.security import is_loopback, new_token
from whimbrel.ui.server import ConsoleServer

__all__ = ["ConsoleServer", "create_app", "is_loopback", "new_token"]
