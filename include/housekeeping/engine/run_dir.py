"""A run directory (``housekeeping.engine.contract`` lays it out): every path of it (:class:`RunDir`), its JSON
files written whole or not at all (a side file renamed over the old one), read back, and the run's facts
(``snapshot/run.json``)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from housekeeping.engine.contract import Table
from housekeeping.store.fs import remove_file

# --- the run directory -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunDir:
    """Every path of one run directory (see the module docstring)."""

    path: Path

    def __init__(self, path: str | Path | RunDir) -> None:
        object.__setattr__(self, "path", Path(path.path if isinstance(path, RunDir) else path))

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    # snapshot
    @property
    def snapshot_dir(self) -> Path:
        return self.path / "snapshot"

    @property
    def run_info(self) -> Path:
        return self.snapshot_dir / "run.json"

    def snapshot_table(self, table: Table | str) -> Path:
        """Where a snapshot table is written (Parquet). Readers go through :func:`snapshot_file`, which also finds
        a run snapshotted as JSON lines before."""
        name = table if isinstance(table, str) else table.name
        return self.snapshot_dir / f"{name}.parquet"

    # plan
    @property
    def plan_dir(self) -> Path:
        return self.path / "plan"

    def plan_table(self, table: Table | str) -> Path:
        return self.plan_dir / (table if isinstance(table, str) else table.name)

    @property
    def plan_summary(self) -> Path:
        return self.plan_dir / "summary.json"

    # gate
    @property
    def gate_dir(self) -> Path:
        return self.path / "gate"

    @property
    def gate_result(self) -> Path:
        return self.gate_dir / "result.json"

    @property
    def data_docs_dir(self) -> Path:
        return self.gate_dir / "data_docs"

    @property
    def data_docs_index(self) -> Path:
        return self.data_docs_dir / "index.html"

    # approval (housekeeping.engine.approval): what was asked of a person, and what they decided
    @property
    def approval_dir(self) -> Path:
        return self.path / "approval"

    @property
    def approval_request(self) -> Path:
        return self.approval_dir / "request.json"

    @property
    def approval_request_md(self) -> Path:
        return self.approval_dir / "request.md"

    @property
    def approval_decision(self) -> Path:
        return self.approval_dir / "decision.json"

    # apply and purge
    @property
    def staged_ledgers_dir(self) -> Path:
        """Key erasure's redacted ledgers, written by the plan and moved into the store by apply (outside
        ``plan/``: the plan's ``erasure/ledgers`` table binds each one by its SHA-256)."""
        return self.path / "staged"

    def staged_ledger(self, name: str) -> Path:
        return self.staged_ledgers_dir / name

    @property
    def apply_dir(self) -> Path:
        return self.path / "apply"

    @property
    def apply_result(self) -> Path:
        return self.apply_dir / "result.json"

    @property
    def purge_result(self) -> Path:
        return self.apply_dir / "purge.json"

    @property
    def purge_due(self) -> Path:
        """What purge is about to remove, written before apply (the approval step): ``due``, ``held``, ``bytes``."""
        return self.approval_dir / "purge-due.json"

    # failures: why a step of the run failed or was refused (``documents.StepFailure``), one per step
    @property
    def failures_dir(self) -> Path:
        return self.path / "failures"

    def step_failure(self, step: str) -> Path:
        return self.failures_dir / f"{step}.json"

    # report
    @property
    def report_dir(self) -> Path:
        return self.path / "report"

    @property
    def report_json(self) -> Path:
        return self.report_dir / "report.json"

    def erasure_proof(self, request_id: int) -> Path:
        """Key erasure's proof-of-erasure document of one request (``housekeeping.mechanisms.erasure.proof``)."""
        return self.report_dir / "proofs" / f"request-{int(request_id)}.json"

    @property
    def report_md(self) -> Path:
        return self.report_dir / "report.md"


def side_file(path: Path) -> Path:
    """Where ``path`` is written before it is renamed into place. One name per writer (a file's permissions as any
    other file's: mkstemp's would be 0600)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")


@contextmanager
def _replacing_file(path: Path) -> Iterator[Path]:
    """A side file beside ``path``, renamed onto it only when the block ends without an error: a reader never
    sees half a file, and a failed write leaves an earlier file as it was."""
    path = Path(path).absolute()  # the side file's removal resolves it against the directory it must stay in
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = side_file(path)
    try:
        yield partial
        partial.replace(path)
    finally:
        remove_file(partial, within=path.parent)  # gone already when renamed


@contextmanager
def _replacing(path: Path) -> Iterator[TextIO]:
    """A text file written as :func:`_replacing_file` writes one."""
    with _replacing_file(path) as partial, partial.open("w", encoding="utf-8") as handle:
        yield handle


def write_json(path: Path, document: Any, *, indent: int | None = 2) -> None:
    """A run directory's JSON document (sorted keys: diffable, and stable for the plan digest), encoded in
    chunks: no second copy of a large document (a report of 100,000 topics) as one string."""
    with _replacing(path) as handle:
        json.dump(document, handle, indent=indent, sort_keys=True, default=str)


# Sorted keys and str() of what JSON has no type for, as write_json; compact, so the C encoder writes it.
_SORTED_KEYS_DEFAULT_STR = json.JSONEncoder(sort_keys=True, default=str)


def write_json_one_line_each(path: Path, document: Any, *, depth: int = 2, indent: int = 2) -> None:
    """A large JSON document (a run's report: one entry per topic, 100,000 of them), laid out for diffs and
    encoded fast: containers above ``depth`` indented, every value at ``depth`` on one line of its own (a topic's
    entry is one line), sorted keys. Python's ``json.dump`` encodes an indented document in pure Python (its C
    encoder only writes compact text), which dominated the time of a report of many topics."""
    encode = _SORTED_KEYS_DEFAULT_STR.encode
    with _replacing(path) as handle:
        for chunk in _laid_out(document, 0, depth, indent, encode):
            handle.write(chunk)
        handle.write("\n")


def _laid_out(value: Any, level: int, depth: int, indent: int, encode: Callable[[Any], str]) -> Iterator[str]:
    if level >= depth or not isinstance(value, dict | list | tuple) or not value:
        # A list subclass produced as it is iterated (the report's StreamedList) is iterated here: the C encoder
        # would read the list's own storage, which is empty. (One nested inside a value written on one line would
        # be written as []: the report keeps its streamed list at the top.)
        yield encode(list(value) if isinstance(value, list) and type(value) is not list else value)
        return
    pad, close = "\n" + " " * (indent * (level + 1)), "\n" + " " * (indent * level)
    if isinstance(value, dict):
        yield "{"
        for i, key in enumerate(sorted(value)):
            name = key if isinstance(key, str) else json.dumps(key)
            yield ("," if i else "") + pad + encode(name) + ": "
            yield from _laid_out(value[key], level + 1, depth, indent, encode)
        yield close + "}"
        return
    yield "["
    for i, item in enumerate(value):
        yield ("," if i else "") + pad
        yield from _laid_out(item, level + 1, depth, indent, encode)
    yield close + "]"


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines file, each parsed as it is read."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)
