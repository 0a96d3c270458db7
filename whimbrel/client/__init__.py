"""The public facade."""

from whimbrel.client.whimbrel import Whimbrel

__all__ = ["Whimbrel"]
