"""How activities start: the python and command launchers here, AWS ones in ``aws``."""

from whimbrel.launch.command import CommandLauncher
from whimbrel.launch.python import PythonLauncher, resolve_target

__all__ = ["CommandLauncher", "PythonLauncher", "resolve_target"]
