"""DynamoDB: table specs, PynamoDB models, conditional writes, error translation."""

from whimbrel.store.meter import CapacityMeter
from whimbrel.store.store import Store

__all__ = ["CapacityMeter", "Store"]
