"""The lines of a streamed decide answer (NDJSON, docs/streaming.md), assembled from the bytes as they arrive.

Bytes become text a whole line at a time: a newline byte never falls inside a UTF-8 character, so a chunk
that splits one (the network cuts anywhere) is never decoded half; a line is only read once it is complete,
and a partial line left when the stream ends is discarded (TypeScript: ``lines.ts`` ``Lines``, the same)."""

from __future__ import annotations

MAX_LINE = 64 * 1024  # a decision line is a few hundred bytes; past this it is not npcmind's: dropped


class Lines:
    """The complete lines of one stream so far, and the part of a line still coming."""

    def __init__(self) -> None:
        self._rest = bytearray()
        self._skipping = False  # inside a line past MAX_LINE: dropped up to its newline
        self.overlong = 0  # lines dropped for being past MAX_LINE (for the scheduler to say)

    def feed(self, data: bytes | str) -> list[str]:
        """The lines this chunk completes (without their newline; a blank line is skipped), in order; a line
        that is not UTF-8 comes out with U+FFFD in it, which its JSON reader then refuses."""
        self._rest += data.encode() if isinstance(data, str) else data
        *whole, rest = self._rest.split(b"\n")
        if whole and self._skipping:  # the end of the line too long to keep
            whole.pop(0)
            self._skipping = False
        if len(rest) > MAX_LINE:  # no newline coming soon: keep none of it
            self.overlong += 1
            self._skipping, rest = True, bytearray()
        self._rest = bytearray(rest)
        out = []
        for raw in whole:
            if len(raw) > MAX_LINE:
                self.overlong += 1
                continue
            line = raw.decode("utf-8", "replace").strip()
            if line:
                out.append(line)
        return out

    @property
    def partial(self) -> bool:
        """Whether a line was left incomplete (the stream cut mid-line)."""
        return bool(self._rest) or self._skipping
