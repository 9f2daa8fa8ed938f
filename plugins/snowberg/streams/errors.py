"""Errors a stream run can stop with. Each message says what to do next."""

from __future__ import annotations


class StreamError(RuntimeError):
    """A stream run cannot go on; the message names the stream and the fix."""


class StreamMissingError(StreamError):
    """The stream does not exist (and the config does not let snowberg create it)."""


class StaleStreamError(StreamError):
    """The stream is stale: its offset fell out of the table's retention. Changes were lost."""


class StreamGoingStaleError(StreamError):
    """The stream will go stale within the alert margin unless it is consumed in time."""


class StreamConfigError(StreamError, ValueError):
    """The table's stream settings cannot work together (e.g. deletes without a primary key)."""
