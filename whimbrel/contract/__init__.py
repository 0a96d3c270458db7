"""The pure contract: states, transitions, definitions, ids, limits. No I/O."""
