"""DynamoDB: table specs, one transport and codec, conditional writes, error translation."""

from whimbrel.store.meter import CapacityMeter
from whimbrel.store.store import Store

__all__ = ["CapacityMeter", "Store"]
