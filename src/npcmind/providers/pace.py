"""When to read a provider's stream next: reading each token as it arrives costs the service several times the
CPU of the whole unstreamed request, for decisions that are not complete yet.

A streamed answer comes token by token (a hosted model writes 50 to 100 a second), and each read of the socket
costs a wake-up of the event loop, a pass through the HTTP parser and one of the reader's: about a hundred reads a
batch of 16. Yet an entity's part of the answer takes several tokens, and the parts come one after another at the
model's rate: between two completions a read finds nothing to decide. So between reads the transport is paused
(the kernel keeps the bytes; one read then takes all of them) until about when the next part can be complete.
Once two reads have completed parts, the parts' own pace tells when the next is due better than the characters'
rate (a part is often twice its fewest characters): the read comes a lag after it, at most a part's time and a
lag from now, and at most PACED_LAGS lags after the part's earliest end (issue 43: 45 reads a batch of 16 where
one a part does).

What the pace aims at is the lag, ``LAG_SHARE`` of the time since the stream opened plus ``LAG_MIN_S``, at most
``LAG_MAX_S`` (30 ms for a part written 0.4 s in, 50 ms from 0.8 s on): before the model's rate is known, and
while a part is overdue, the socket is read every lag; else at the earliest a part can be complete (its fewest
characters, at a quarter faster than the model has written so far) plus the lag. Never past the call's deadline
(what was written by then is read in time).

Those times are guesses from the rate so far: a server that sends tokens in bursts, a stall in the window the
rate is told from, or a model that speeds up mid-answer makes a part complete earlier than guessed, and a part
read more than a lag late. What is guaranteed is the streaming target less 5 ms: whatever was guessed, the socket
is held at most ``bound(now)`` after the reader asks (10% of the time since the stream opened, with its response's
headers, + 15 ms; the call began a little before, so this is tighter than the target counted from the call), and
a part complete while it was held is read when it is released, within its target (10% of its time + 20 ms). The
5 ms are for the timer's overshoot and the handling of the read before (1.4-2.0 ms at the 90th percentile on a
busy 2-core machine, a review measured). Without this, bench/pace_bench.py found parts up to 76 ms past the
target in 26 of its 144 scenarios; with it, none. docs/streaming.md says so.
"""

from __future__ import annotations

from dataclasses import dataclass

LAG_SHARE = 0.05  # a decision written t seconds into the call may be read up to 5% of t late...
LAG_MIN_S = 0.010  # ...plus 10 ms: a part written at 0.4 s, 30 ms at most
LAG_MAX_S = 0.050  # ...and 50 ms at most: the last entity is not to come much after the unstreamed answer would
RATE_MARGIN = 1.25  # the model may write a quarter faster than it has so far: wake up early rather than late
RATE_WINDOW_S = 0.1  # the rate is told from this much of the answer at least (a token brings 1 to 6 characters)
PACED_LAGS = 1.5  # a part read at the parts' own pace comes at most this many lags after its earliest end
MAX_LAGS = 3  # a wait for the next part is at most this many lags: a rate misjudged costs a few reads, not a part
DEADLINE_MARGIN_S = 0.005  # the last read before the deadline leaves this to decide what it read
TARGET_SHARE = 0.1  # the streaming target: a part written t seconds into the call reaches the game by 10% of t...
TARGET_MIN_S = 0.020  # ...+ 20 ms after it was written (docs/streaming.md)
TARGET_MARGIN_S = 0.005  # what a read leaves of the target to decide and send what it read


@dataclass(slots=True)
class ReadPace:
    """The reading pace of one streamed answer. The adapter says how much of the answer is written
    (``written``, in characters) and when an entity's part is complete (``completed``); the reader asks
    ``next_read`` before each read of the socket. ``part`` is the fewest characters an entity's part can take
    in the answer format (``PartialAnswer.least_part``): a true lower bound, so the pace is never late by
    more than the lag for guessing a part too long."""

    began: float  # the event loop's time when the call began
    part: int  # the fewest characters of an entity's part
    read_by: float | None = None  # the loop time by which what was written must have been read: the deadline
    written: int = 0  # characters of the answer read so far
    _last_end: int = 0  # where the last complete part ended, in characters (the first part's begins at 0)
    _first: tuple[float, int] | None = None  # when the first text was read, and how much
    _parts: int = 0  # parts complete so far
    _timed: int = 0  # of them, those whose read has been timed
    _first_done: tuple[float, int] | None = None  # when the first completion was read, and the parts by then
    _last_done: float = 0.0  # when the last completion was read

    def completed(self, end: int, parts: int = 1) -> None:
        """``parts`` entities have their part complete, the last ending ``end`` characters into the answer
        (a read may bring text past it: the next part began there)."""
        self._last_end = end
        self._parts += parts

    def _every(self, now: float) -> float | None:
        """The time between two parts, as the parts read so far came (None before two reads completed any): a
        model writes its parts at a steady pace, which the characters' rate alone misjudges (a part is often
        twice its fewest characters)."""
        if self._parts != self._timed:  # this read completed parts: time it
            self._timed = self._parts
            self._last_done = now
            if self._first_done is None:
                self._first_done = (now, self._parts)
        if self._first_done is None or self._parts == self._first_done[1]:
            return None
        since, parts = self._first_done
        return (self._last_done - since) / (self._parts - parts)

    def bound(self, now: float) -> float:
        """The longest the socket may be held from ``now``, when the reader asks: a part complete meanwhile is then
        read at most TARGET_SHARE of its time since the stream opened + TARGET_MIN_S - TARGET_MARGIN_S late."""
        return TARGET_SHARE * max(now - self.began, 0.0) + TARGET_MIN_S - TARGET_MARGIN_S

    def lag(self, at: float) -> float:
        """How late a part complete at loop time ``at`` may be read."""
        return min(LAG_SHARE * max(at - self.began, 0.0) + LAG_MIN_S, LAG_MAX_S)

    def next_read(self, now: float) -> float:
        """The loop time of the next read: now while nothing is written (the first token is read as it comes);
        else when the next part can first be complete (at the model's rate so far) plus the lag allowed then;
        the lag from now while that rate is unknown (under RATE_WINDOW_S of text so far) or the part overdue."""
        if not self.written:
            return now
        if self._first is None:
            self._first = (now, self.written)
        lag = self.lag(now)
        at = now + lag
        since, before = self._first
        every = self._every(now)
        if now - since >= RATE_WINDOW_S and self.written > before:
            rate = (self.written - before) / (now - since) * RATE_MARGIN  # characters a second, at the fastest
            due = now + (self._last_end + self.part - self.written) / rate
            if due > now:
                at = min(due + self.lag(due), now + MAX_LAGS * lag)
                if every is not None and self._last_done + every > due:  # the parts' own pace: one read a part
                    expected = self._last_done + every
                    # but a part that comes at its earliest is read at most PACED_LAGS lags after it: 7.5% of the
                    # time since the call began + 15 ms, within the streaming target (10% of its limit + 20 ms)
                    paced = min(expected + self.lag(expected), now + every + lag)
                    at = min(max(at, paced), due + PACED_LAGS * self.lag(due))
        # whatever was guessed: a part complete while the socket is held is read within the streaming target
        at = min(at, now + self.bound(now))
        if self.read_by is not None:
            at = min(at, self.read_by - DEADLINE_MARGIN_S)
        return at
