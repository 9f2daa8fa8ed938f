"""Shared primitives every layer uses: durations, identifiers, failpoints."""
