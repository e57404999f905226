"""When to read a provider's stream next: reading each token as it arrives costs the service several times the
CPU of the whole unstreamed request, for decisions that are not complete yet.

A streamed answer comes token by token (a hosted model writes 20 to 100 a second), and each read of the socket
costs a wake-up of the event loop, a pass through the HTTP parser and one of the reader's. So between reads the
transport is paused (over plain HTTP the kernel keeps the bytes and one read takes all of them; over TLS the loop
still reads them into the TLS layer as they come, and only the HTTP parser and the reader wait) for as long as
the streaming target allows, and no longer: ``bound(now)``, 10% of the time since the stream opened (with its
response's headers; the call began a little before, so this is tighter than the target counted from the call) +
15 ms, counted from when the read before came (providers/http.py: the time its events took to handle is not
added). A part complete while the socket was held is read when it is released, within its target (10% of its
time + 20 ms); the 5 ms left are for the timer's overshoot and the loop's delay in running the read. Never past
the call's deadline.

The pace trusts no guess of when a part ends. Earlier paces read a lag (5% of the call's time + 10 ms, at most
50 ms) after the part was due at the model's rate or at the parts' own pace, and read again every lag while it
was late: 2.14 reads a part at 20 tokens a second, where holding to the bound takes 1.48, every part still
within its target; in runs alternated with the pace before, a streamed line's CPU went from 1.41-1.44 to
0.98-1.00 ms, the mean time to a decision from 0.57 of the batch's to 0.59 (issue 43, docs/bench.md).

Once every part but the last has been read, the socket is held at most LAST_LAG_S: nothing comes after the last part
to read it with, and the last decision is not to come much after the unstreamed answer would. When the last two
parts end within one hold, or the model skips an entity, the last part waits up to the bound like the others (still
within its target): at 20 tokens a second it is read 77 ms after it was written on average in bench/pace_bench.py's
steady model (28 ms with the earlier pace).
"""

from __future__ import annotations

from dataclasses import dataclass

LAST_LAG_S = 0.050  # once every part but the last is read, the socket is held at most this long
TARGET_SHARE = 0.1  # the streaming target: a part written t seconds into the call reaches the game by 10% of t...
TARGET_MIN_S = 0.020  # ...+ 20 ms after it was written (docs/streaming.md)
TARGET_MARGIN_S = 0.005  # what a read leaves of the target to decide and send what it read
DEADLINE_MARGIN_S = 0.005  # the last read before the deadline leaves this to decide what it read


@dataclass(slots=True)
class ReadPace:
    """The reading pace of one streamed answer of ``parts`` entities. The adapter says how much of the answer is
    written (``written``, in characters) and how many parts are complete (``completed``); the reader asks
    ``next_read`` before each read of the socket."""

    began: float  # the event loop's time when the stream opened
    parts: int  # the entities the call asked: their parts make the answer
    read_by: float | None = None  # the loop time by which what was written must have been read: the deadline
    written: int = 0  # characters of the answer read so far
    done: int = 0  # parts complete so far

    def completed(self, parts: int = 1) -> None:
        """``parts`` more entities have their part complete."""
        self.done += parts

    def bound(self, now: float) -> float:
        """The longest the socket may be held from ``now``, when the read before came: a part complete meanwhile is
        then read at most TARGET_SHARE of its time since the stream opened + TARGET_MIN_S - TARGET_MARGIN_S late."""
        return TARGET_SHARE * max(now - self.began, 0.0) + TARGET_MIN_S - TARGET_MARGIN_S

    def next_read(self, now: float) -> float:
        """The loop time of the next read, ``now`` being when the read before came: now while nothing is written (the
        first token is read as it comes); else the bound from now, or LAST_LAG_S once every part but the last is
        read; never past the deadline."""
        if not self.written:
            return now
        hold = self.bound(now)
        if self.done >= self.parts - 1:
            hold = min(hold, LAST_LAG_S)
        at = now + hold
        if self.read_by is not None:
            at = min(at, self.read_by - DEADLINE_MARGIN_S)
        return at
