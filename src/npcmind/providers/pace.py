"""When to read a provider's stream next: reading each token as it arrives costs the service several times the
CPU of the whole unstreamed request, for decisions that are not complete yet.

A streamed answer comes token by token (a hosted model writes 50 to 100 a second), and each read of the socket
costs a wake-up of the event loop, a pass through the HTTP parser and one of the reader's: about a hundred reads a
batch of 16. Yet an entity's part of the answer takes several tokens, and the parts come one after another at the
model's rate: between two completions a read finds nothing to decide. So between reads the transport is paused
(the kernel keeps the bytes; one read then takes all of them) until about when the next part is complete.

Both times come from characters, not from when reads happened (a read is late by up to a lag, and a pace told
from read times drifts a lag later a part): the earliest end of the next part is its fewest characters at the
fastest rate the model has written over a window (a quarter faster still: a stall slows the average, never the
fastest); its expected end is the parts' mean length so far at the model's mean rate. The read comes a lag after
the expected end, one read a part, but at most PACED_SHARE of the call's time + PACED_MIN_S, and PACED_MAX_S,
after the earliest end (issue 43: at 20 tokens a second, a part is often twice its fewest characters, and a
bound of a lag after the earliest end read most parts twice).

What a decision may lose to this is bounded by the lag, ``LAG_SHARE`` of the time since the call began plus
``LAG_MIN_S``, at most ``LAG_MAX_S`` (30 ms for a part written 0.4 s in, 50 ms from 0.8 s on), after its
expected end, and by the paced bound after its earliest: before the model's rate is known, and while a part is
overdue, the socket is read every lag. Never past the call's deadline (what was written by then is read in
time). docs/streaming.md says so; tests/test_provider_stream.py simulates models that stall, burst and speed up.
"""

from __future__ import annotations

from dataclasses import dataclass

LAG_SHARE = 0.05  # a decision written t seconds into the call may be read up to 5% of t late...
LAG_MIN_S = 0.010  # ...plus 10 ms: a part written at 0.4 s, 30 ms at most
LAG_MAX_S = 0.050  # ...and 50 ms at most: the last entity is not to come much after the unstreamed answer would
RATE_MARGIN = 1.25  # the model may write a quarter faster than it has so far: wake up early rather than late
RATE_WINDOW_S = 0.1  # the rate is told from this much of the answer at least (a token brings 1 to 6 characters)
PACED_SHARE = 0.075  # a part read at its expected end comes at most 7.5% of the call's time...
PACED_MIN_S = 0.015  # ...+ 15 ms after its earliest end (the streaming target: 10% + 20 ms)...
PACED_MAX_S = 0.100  # ...and at most 100 ms after it (a model that speeds up is not read far past its target)
MAX_LAGS = 3  # a wait for the earliest end is at most this many lags: a rate misjudged costs a few reads
DEADLINE_MARGIN_S = 0.005  # the last read before the deadline leaves this to decide what it read


@dataclass(slots=True)
class ReadPace:
    """The reading pace of one streamed answer. The adapter says how much of the answer is written
    (``written``, in characters) and when an entity's part is complete (``completed``); the reader asks
    ``next_read`` before each read of the socket. ``part`` is the fewest characters an entity's part can take
    in the answer format (``PartialAnswer.least_part``): a true lower bound, so the earliest end is never
    guessed late for a part too long."""

    began: float  # the event loop's time when the call began
    part: int  # the fewest characters of an entity's part
    read_by: float | None = None  # the loop time by which what was written must have been read: the deadline
    written: int = 0  # characters of the answer read so far
    _last_end: int = 0  # where the last complete part ended, in characters (the first part's begins at 0)
    _parts: int = 0  # parts complete so far
    _first: tuple[float, int] | None = None  # when the first text was read, and how much
    _window: tuple[float, int] | None = None  # the start of the window the fastest rate is measured over
    _fastest: float = 0.0  # characters a second, the fastest over a window of RATE_WINDOW_S at least

    def completed(self, end: int, parts: int = 1) -> None:
        """``parts`` entities have their part complete, the last ending ``end`` characters into the answer
        (a read may bring text past it: the next part began there)."""
        self._last_end = end
        self._parts += parts

    def lag(self, at: float) -> float:
        """How late a part complete at loop time ``at`` may be read."""
        return min(LAG_SHARE * max(at - self.began, 0.0) + LAG_MIN_S, LAG_MAX_S)

    def _rates(self, now: float) -> tuple[float, float]:
        """The fastest rate over a window and the mean rate since the first text (0.0 before a window's worth)."""
        if self._first is None:
            self._first = self._window = (now, self.written)
            return 0.0, 0.0
        assert self._window is not None
        since, before = self._window
        if now - since >= RATE_WINDOW_S:
            if self.written > before:
                self._fastest = max(self._fastest, (self.written - before) / (now - since))
            self._window = (now, self.written)
        since, before = self._first
        mean = (self.written - before) / (now - since) if self._fastest and now > since else 0.0
        return self._fastest, mean

    def next_read(self, now: float) -> float:
        """The loop time of the next read: now while nothing is written (the first token is read as it comes);
        else a lag after the next part's expected end, within the paced bound of its earliest end; the lag from
        now while the rate is unknown (under RATE_WINDOW_S of text so far) or the part overdue."""
        if not self.written:
            return now
        fastest, mean = self._rates(now)
        lag = self.lag(now)
        at = now + lag
        if fastest:
            earliest = now + (self._last_end + self.part - self.written) / (fastest * RATE_MARGIN)
            if earliest > now:
                at = min(earliest + self.lag(earliest), now + MAX_LAGS * lag)
                if self._parts and mean:
                    expected = now + (self._last_end * (self._parts + 1) / self._parts - self.written) / mean
                    if expected > at:  # one read a part: a lag after its expected end, within the paced bound
                        paced = min(PACED_SHARE * (earliest - self.began) + PACED_MIN_S, PACED_MAX_S)
                        at = min(expected + self.lag(expected), earliest + paced)
        if self.read_by is not None:
            at = min(at, self.read_by - DEADLINE_MARGIN_S)
        return at
