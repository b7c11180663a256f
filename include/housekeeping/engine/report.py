"""Per-run report: ``report/report.json`` (data) and ``report/report.md`` (the page a person reads).

Each mechanism builds its report's data (``Mechanism.build_report``, in its package) on what every report starts
with (:func:`run_section`: the run, the gate's verdict, apply and purge results); :func:`write_report` renders the
mechanism's template (``Mechanism.report_template``; what it includes is found in ``Mechanism.template_dirs``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from housekeeping.core.timeutil import format_ms
from housekeeping.engine.contract import ACTIONS, TOPICS
from housekeeping.engine.documents import (
    ApprovalDecision,
    ApprovalRequest,
    RunInfo,
    read_applied_run,
    read_document,
    read_gate_result,
    read_purged_run,
    read_run_info,
)
from housekeeping.engine.mechanism import Mechanism
from housekeeping.engine.run_dir import RunDir, write_json_one_line_each
from housekeeping.engine.snapshot_reads import count_snapshot_rows, read_snapshot_columns, text_columns

if TYPE_CHECKING:
    from housekeeping.engine.contract import Table

MAX_TOPICS_IN_MARKDOWN = 200


class StreamedList(list):
    """A report's long list (one entry per topic) produced on demand, each time it is iterated, so neither the
    entries nor their source rows are held at once: ``json.dump`` (whose encoder takes any ``list`` and iterates it)
    writes ``report.json`` entry by entry, and the page renders the first ``MAX_TOPICS_IN_MARKDOWN`` (a slice).
    ``produce`` yields the ``count`` entries in order, the same ones on every call."""

    def __init__(self, count: int, produce: Callable[[], Iterator[Any]]) -> None:
        super().__init__()
        self._count, self._produce = count, produce

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[Any]:
        return iter(self._produce())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            return list(itertools.islice(self._produce(), start, stop, step))
        position = index if index >= 0 else self._count + index
        if not 0 <= position < self._count:
            raise IndexError(index)
        return next(itertools.islice(self._produce(), position, None))

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


def human_bytes(value: int | float | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


# A ledger decision as reports show it (trim, offload): the columns a decisions table has in common.
DECISION_COLUMNS = ["topic", "ledgerId", "entries", "size", "closedAtMs", "decision", "kind", "reason"]


def ledger_decision(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "ledgerId": row["ledgerId"],
        "entries": row["entries"],
        "size": row["size"],
        "closed": format_ms(row["closedAtMs"]) if row["closedAtMs"] is not None else "open",
        "decision": row["decision"],
        "kind": row["kind"],
        "reason": row["reason"],
    }


def topics_ascending(topic: Any) -> bool:
    """Whether an Arrow column of topic names has no null and never goes back (the order a one-pass plan writes a
    part in): checking costs a boolean per row, sorting would copy every row."""
    import pyarrow.compute as pc

    count = len(topic)
    if topic.null_count:
        return False
    return count < 2 or not pc.any(pc.less(topic.slice(1), topic.slice(0, count - 1))).as_py()


def merged_part_rows(parts: Sequence[Path], spec: Table) -> Iterator[dict[str, Any]]:
    """The rows of plan table ``spec``'s ``parts``, each part in topic order (:func:`topics_ascending`, checked by
    the caller on its :func:`housekeeping.engine.plan.read_part_arrow`), merged by topic and read a line at a time,
    as :func:`sparse_rows` gives them (a topic's rows in part order): the order of the whole table sorted by topic,
    never held whole."""
    import heapq
    from operator import itemgetter

    return heapq.merge(*(_sparse_part_rows(part, spec) for part in parts), key=itemgetter("topic"))


def _sparse_part_rows(part: Path, spec: Table) -> Iterator[dict[str, Any]]:
    """A checked part file's rows, a line at a time, as :func:`sparse_rows` gives them."""
    from housekeeping.engine.plan import checked_part_rows

    for row in checked_part_rows(part, spec, spec.names):
        yield {k: v for k, v in row.items() if v is not None}


def _in_topic_order(decisions: Any) -> bool:
    """Whether the rows already come by topic, then ledger (the plan writes them so): sorting would copy every
    decision, checking their order costs a boolean per row."""
    import pyarrow.compute as pc

    count = decisions.num_rows
    if count < 2:
        return True
    topic, ledger = decisions.column("topic"), decisions.column("ledgerId")
    earlier, later = topic.slice(0, count - 1), topic.slice(1)
    if not topics_ascending(topic):
        return False
    same_topic = pc.equal(earlier, later)
    backwards = pc.less_equal(ledger.slice(1), ledger.slice(0, count - 1))
    return not pc.any(pc.and_(same_topic, backwards)).as_py()


def entries_per_topic(
    decisions: Any, entry: Callable[[list[dict[str, Any]]], dict[str, Any]]
) -> StreamedList:
    """One report entry per topic of a per-ledger decisions table (Arrow, ``DECISION_COLUMNS`` at least), in topic
    order, built from the topic's rows in ledger order when the report is written: a store's ledger decisions are
    held as Arrow columns, never as one dict each (437,614 at 100,000 topics)."""
    import numpy as np
    import pyarrow.compute as pc

    if not _in_topic_order(decisions):
        decisions = decisions.sort_by([("topic", "ascending"), ("ledgerId", "ascending")])
    codes = pc.dictionary_encode(decisions.column("topic")).combine_chunks().indices.to_numpy()
    starts = [0, *(np.flatnonzero(np.diff(codes)) + 1).tolist()] if len(codes) else []
    bounds = list(zip(starts, [*starts[1:], len(codes)], strict=True)) if starts else []

    def produce() -> Iterator[dict[str, Any]]:
        # Rows converted a batch at a time, not a slice per topic (100,000 small conversions were a third of the
        # 100,000-topic trim report's time).
        rows = (row for batch in decisions.to_batches(max_chunksize=65_536) for row in batch.to_pylist())
        for start, stop in bounds:
            yield entry(list(itertools.islice(rows, stop - start)))

    return StreamedList(len(bounds), produce)


def _topic_groups(rows: Iterator[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """Consecutive rows of one topic, as (topic, rows), from rows that come by topic."""
    for topic, group in itertools.groupby(rows, key=lambda row: row["topic"]):
        yield topic, list(group)


def plan_entries_per_topic(
    run_dir: Path,
    spec: Table,
    columns: Sequence[str],
    entry: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> StreamedList:
    """:func:`entries_per_topic` of plan table ``spec`` (``columns`` of it) read from its part files as the report is
    written, never held whole (4.4 million trim decisions at a million topics). A one-pass plan writes each
    snapshot bucket's topics to a part of their own, by topic and ledger within it; the parts are merged by topic
    (a topic found in two parts has its rows joined, in ledger order). A first pass checks each part against
    ``spec`` and the order of its topics and ledgers, and counts the topics; a part not in that order has the table
    read whole and sorted."""
    import heapq

    import pyarrow as pa
    import pyarrow.compute as pc

    from housekeeping.engine.plan import (
        checked_part_rows,
        plan_table_parts,
        read_part_arrow,
        read_table_arrow,
    )

    parts = plan_table_parts(run_dir, spec)
    topics = []
    for part in parts:
        keys = read_part_arrow(part, spec).select(["topic", "ledgerId"])
        if not _in_topic_order(keys):
            return entries_per_topic(read_table_arrow(run_dir, spec).select(list(columns)), entry)
        topics.append(pc.unique(keys.column("topic")))
    count = pc.count_distinct(pa.chunked_array(topics, pa.string())).as_py() if topics else 0

    def produce() -> Iterator[dict[str, Any]]:
        groups = heapq.merge(
            *(_topic_groups(checked_part_rows(part, spec, columns)) for part in parts),
            key=lambda group: group[0],
        )
        topic, rows = None, []
        for next_topic, next_rows in groups:
            if rows and next_topic != topic:
                yield entry(rows)
                rows = []
            elif rows:  # the same topic in another part
                next_rows = sorted([*rows, *next_rows], key=lambda row: row["ledgerId"])
                rows = []
            topic, rows = next_topic, [*rows, *next_rows]
        if rows:
            yield entry(rows)

    return StreamedList(count, produce)


def plan_rows(run_dir: Path, spec: Table) -> StreamedList:
    """A plan table's rows as :func:`sparse_rows` gives them, read from its part files as the report is written
    (the parts in name order: :func:`housekeeping.engine.plan.read_table_arrow`'s order), never held whole; each
    part checked against ``spec`` first."""
    from housekeeping.engine.plan import plan_table_parts, read_part_arrow

    parts = plan_table_parts(run_dir, spec)
    count = sum(read_part_arrow(part, spec).num_rows for part in parts)
    return StreamedList(count, lambda: (row for part in parts for row in _sparse_part_rows(part, spec)))


class TopicValuesInOrder:
    """Per topic, the value of one column of the snapshot's topics table (a tuple of several), as
    :func:`housekeeping.engine.snapshot_reads.snapshot_topic_values` gives it, for lookups in ascending topic order (a
    report's entries' order): the columns held as Arrow sorted by topic and walked forward, not a dict of a million
    topics. A topic before the last one looked up starts the walk again."""

    def __init__(self, run_dir: Path, *columns: str) -> None:
        table = read_snapshot_columns(run_dir, TOPICS.select("topic", *columns), shared=text_columns(columns))
        self._table, self._columns = table.sort_by("topic"), columns
        self._restart()

    def _restart(self) -> None:
        self._rows = (
            row for batch in self._table.to_batches(max_chunksize=4096) for row in batch.to_pylist()
        )
        self._row: dict[str, Any] | None = None

    def __getitem__(self, topic: str) -> Any:
        if self._row is not None and topic < self._row["topic"]:
            self._restart()
        while self._row is None or self._row["topic"] < topic:
            self._row = next(self._rows, None)
            if self._row is None:
                self._restart()
                raise KeyError(topic)
        if self._row["topic"] != topic:
            raise KeyError(topic)
        values = tuple(self._row[column] for column in self._columns)
        return values[0] if len(values) == 1 else values

    def get(self, topic: str, default: Any = None) -> Any:
        try:
            return self[topic]
        except KeyError:
            return default


def sparse_batch_rows(batches: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Arrow record batches' rows as :func:`housekeeping.engine.plan.read_table` gives them (a null column left out,
    as Spark's JSON writer leaves it out). A column null in every row of a batch is dropped before its rows are made
    (most of a plan table's columns are another kind's)."""
    for batch in batches:
        present = [
            name
            for name, column in zip(batch.schema.names, batch.columns, strict=True)
            if column.null_count < len(column)
        ]
        if len(present) < batch.num_columns:
            batch = batch.select(present)
        for row in batch.to_pylist():
            yield {k: v for k, v in row.items() if v is not None}


def sparse_rows(table: Any) -> StreamedList:
    """An Arrow plan table's rows as :func:`sparse_batch_rows` gives them, produced a batch at a time when the
    report is written."""
    return StreamedList(table.num_rows, lambda: sparse_batch_rows(table.to_batches(max_chunksize=4096)))


def run_section(run_dir: Path, info: RunInfo, dry_run: bool) -> dict[str, Any]:
    """What every mechanism's report starts with: the run, the gate's verdict, apply and purge results."""
    run = RunDir(run_dir)
    gate = read_gate_result(run)
    purged = read_purged_run(run)
    applied = read_applied_run(run)
    request = read_document(ApprovalRequest, run.approval_request)
    decision = read_document(ApprovalDecision, run.approval_decision)
    return {
        "mechanism": info.mechanism,
        "runId": info.run_id,
        "asOf": info.as_of,
        "asOfMs": info.as_of_ms,
        "dryRun": dry_run,
        "scope": info.scope,
        "store": info.store,
        "topicsExamined": count_snapshot_rows(run, TOPICS),
        "gate": {
            "success": gate is not None and gate.success,
            "expectations": len(gate.expectations) if gate is not None else 0,
            "failed": [o.as_json() for o in gate.failed] if gate is not None else [],
        },
        "apply": applied.as_json() if applied is not None else None,
        # The approval step's request (thresholds, reasons) and decision (who, when); None without one.
        "approval": (
            None
            if request is None
            else {
                "request": request.as_json(),
                "decision": decision.as_json() if decision is not None else None,
            }
        ),
        # nextPurgeAfter is always there (None when nothing waits: a purge that emptied the log).
        "purge": (
            dict(
                purged.as_json(),
                nextPurgeAfter=format_ms(purged.next_purge_after_ms) if purged.next_purge_after_ms else None,
            )
            if purged is not None
            else None
        ),
    }


def render_markdown(report: dict[str, Any], template: Path, search: Sequence[Path] = ()) -> str:
    """The report page from its template (``search``: more folders its includes are found in)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    env = Environment(
        loader=FileSystemLoader([str(template.parent), *map(str, search)]),
        undefined=StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
        autoescape=False,
    )
    env.filters["human"] = human_bytes
    env.filters["ms"] = format_ms
    topics = report.get("topics")
    if topics is None or len(topics) <= MAX_TOPICS_IN_MARKDOWN:
        return env.get_template(template.name).render(r=report)
    text = env.get_template(template.name).render(r=dict(report, topics=topics[:MAX_TOPICS_IN_MARKDOWN]))
    return text + f"\n_{len(topics) - MAX_TOPICS_IN_MARKDOWN} more topics are in report.json._\n"


def write_report(run_dir: Path, spec: Mechanism, *, dry_run: bool) -> Path:
    run = RunDir(run_dir)
    report = (
        spec.build_report(run.path, dry_run=dry_run)
        if spec.has_own_report
        else plan_report(run.path, spec, dry_run=dry_run)
    )
    write_json_one_line_each(run.report_json, report)
    page = render_markdown(report, spec.report_template, spec.template_dirs)
    run.report_md.write_text(page, encoding="utf-8")
    return run.report_md


def plan_report(run_dir: Path, spec: Mechanism, *, dry_run: bool) -> dict[str, Any]:
    """The report of a mechanism without a report module of its own (``templates/report.md.j2``): the run's section,
    its plan's rows by action kind and the plan's figures."""
    from housekeeping.engine.plan import read_summary, table_batches

    run = RunDir(run_dir)
    rows: dict[str, int] = {}
    for action in sparse_batch_rows(table_batches(run.path, ACTIONS)):
        rows[action["action"]] = rows.get(action["action"], 0) + 1
    return {
        **run_section(run.path, read_run_info(run), dry_run),
        "title": spec.title,
        "actions": [
            {"action": k.name, "description": k.description, "rows": rows.get(k.name, 0)}
            for k in spec.actions
        ],
        "plan": dict(read_summary(run.path).figures),
    }
