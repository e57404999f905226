"""Decisions given out on a stream before their batch's commit: appended to a file beside the store, committed
with the batch's last group (or within a second), read back into the store at start after a crash.

A streamed batch gives a line an entity, and each line's decision must be kept before it goes out. Kept by a
commit of its own, a line cost 267 us of CPU on a process woken from sleep and wrote 9 KiB of WAL (a page frame
of the table and one of its index a commit); appended here, 99 us and nothing in the WAL until the batch's one
commit (bench/pending_bench.py: 4.6 -> 2.1 ms and 137 -> 24 KiB of WAL a batch of 16).
Both survive a crash of the process and neither waits on the disk, so a line appended here is as kept as a
line committed: the rows go into SQLite in one transaction with the batch's features, and a restart after a
kill -9 puts back whatever the file holds before a number is handed out. The file is emptied after each commit
that took its rows, so it holds a few batches' lines at most; it is refused past ``LIMIT`` (a line then says
the store could not keep it, as when a commit fails).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import struct
import zlib

import msgspec

from npcmind.storage.base import StoreError

log = logging.getLogger("npcmind.storage")

Row = tuple[int, int, str, float, bytes]  # a batches row: first number, how many, session, time, decisions
_HEAD = struct.Struct("<II")  # a record's length and its CRC-32
LIMIT = 4 * 1024 * 1024  # bytes the file may hold: about 1,500 streamed batches' lines not yet committed
MAX_RECORD = 256 * 1024  # one group's row: 16 decisions of long ids and labels are under 20 KB
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Row).decode


class PendingFile:
    """The append-only file of one store's rows given out but not yet committed (``<store>.pending``)."""

    def __init__(self, db_path: str) -> None:
        """Open (or create) the file; a ValueError that names it when it cannot be this store's file."""
        self.path = db_path + ".pending"
        self._broken = False  # a torn record could not be cut off: nothing is appended after it
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as e:
            raise ValueError(
                f"{self.path} cannot be opened ({e.strerror}): it holds the store's streamed rows"
            ) from None
        info = os.fstat(self._fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(self._fd)
            raise ValueError(f"{self.path} is not a regular file: it must hold the store's streamed rows; move it away")
        self._size = info.st_size

    @property
    def size(self) -> int:
        """Bytes the file holds."""
        return self._size

    def read_back(self) -> list[Row]:
        """The rows a crash left here, in the order they were given; a record cut short by the crash, or
        damaged, ends them (what follows it was never acknowledged). A file past LIMIT is no file of ours."""
        if self._size > LIMIT + MAX_RECORD + _HEAD.size:
            raise ValueError(
                f"{self.path} holds {self._size:,} bytes, more than npcmind ever leaves there ({LIMIT:,}): "
                "it is not this store's; move it away"
            )
        try:
            raw = os.pread(self._fd, self._size, 0)
        except OSError as e:
            raise ValueError(f"{self.path} cannot be read ({e.strerror}): it holds the store's streamed rows") from None
        rows: list[Row] = []
        at = 0
        while at + _HEAD.size <= len(raw):
            n, crc = _HEAD.unpack_from(raw, at)
            body = raw[at + _HEAD.size : at + _HEAD.size + n]
            if n > MAX_RECORD or len(body) < n or zlib.crc32(body) != crc:
                log.warning("store: %s ends in a damaged record at byte %d: the rows before it are kept", self.path, at)
                break
            try:
                rows.append(_decode(body))
            except msgspec.DecodeError:
                log.warning("store: %s holds an unreadable record at byte %d: the rows before it kept", self.path, at)
                break
            at += _HEAD.size + n
        return rows

    def append(self, row: Row) -> None:
        """Keep a row before its line goes out: a StoreError when it cannot be (the disk full, or the file at
        LIMIT because the commits that empty it keep failing)."""
        body = _encode(row)
        if self._broken or len(body) > MAX_RECORD or self._size + _HEAD.size + len(body) > LIMIT:
            raise StoreError(
                f"the store could not keep this request ({self.path} is full or damaged: its rows wait on a commit "
                "that keeps failing); nothing of it was kept"
            )
        record = _HEAD.pack(len(body), zlib.crc32(body)) + body
        try:
            written = os.write(self._fd, record)
        except OSError as e:
            raise StoreError(f"the store could not keep this request ({e.strerror}); nothing of it was kept") from e
        if written == len(record):
            self._size += written
            return
        try:  # a short write to a regular file: the disk is full; the torn record is cut off
            os.ftruncate(self._fd, self._size)
        except OSError:  # left in place, it would end what a restart reads back: nothing more is appended
            self._broken = True
        raise StoreError("the store could not keep this request (the disk is full); nothing of it was kept")

    def empty(self) -> None:
        """Forget every row: a commit holds them now (a file that cannot be cut is read back again at start, its
        rows put back once more, which changes nothing: said, not raised)."""
        if not self._size and not self._broken:
            return
        try:
            os.ftruncate(self._fd, 0)
        except OSError as e:
            log.warning("store: %s could not be emptied (%s); its committed rows are read back at start", self.path, e)
            return
        self._size = 0
        self._broken = False

    def close(self) -> None:
        """Close the file, and remove it when nothing waits in it."""
        if self._fd < 0:
            return
        size, self._size = self._size, 0
        os.close(self._fd)
        self._fd = -1
        if not size:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
