"""The simulation's own record (JSON Lines, one event a line, in the order they happened; docs/cli.md, "Simulate"):
every entry published with a checksum of its payload, every acknowledgement with the mark-delete it left, and every
client and operator change. An independent checker reads it against the store: what a durable subscription had not
acknowledged, or the retention in force kept, must still be there.

Each line is written whole to the operating system as it happens (line-buffered): a simulation killed mid-way
leaves a log whose every line is an event that committed, and never a cut line the checker would have to guess at.
An event is logged after its store call returned, so an entry in the log is an entry the store acknowledged."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import IO, Any


def checksum(payload: str | None) -> str:
    """CRC-32 of the payload's UTF-8 bytes, 8 hex digits (the value a reader compares what it reads back with)."""
    return f"{zlib.crc32(b'' if payload is None else payload.encode()):08x}"


class SimulationLog:
    """Appends events to ``path`` (None: keeps nothing). ``event(kind, at_ms, **fields)``."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("a", encoding="utf-8", buffering=1)

    def event(self, kind: str, at_ms: int, **fields: Any) -> None:
        if self._file is not None:
            self._file.write(json.dumps({"event": kind, "at": at_ms, **fields}, separators=(",", ":")) + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
