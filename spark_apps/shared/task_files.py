"""Files a Spark task reads or writes itself, beside Spark's own reads and writes: a plan table's rows of one topic
found through the row groups' topic ranges (:class:`TopicRows`: no shuffle brings them to the task), part files a
task writes (:class:`TaskParts`: rows that never pass through Spark's), and how many tasks share a run's topics."""

from __future__ import annotations

import bisect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from housekeeping.engine.plan import is_table_file
from housekeeping.store.fs import remove_tree

if TYPE_CHECKING:
    import pyarrow as pa


class TaskParts:
    """Parquet part files a task writes itself, one per table of ``tables`` (name -> (directory, Arrow schema)):
    tables of entries that then never pass through Spark's rows. A part is opened at the task's first rows for it,
    written under a hidden name and renamed when the task's input ends, so no reader sees a half-written part and
    a task run again replaces its own (its name is the task's partition)."""

    def __init__(self, tables: Mapping[str, tuple[str, pa.Schema]]) -> None:
        from pyspark import TaskContext

        context = TaskContext.get()
        self._task = context.partitionId() if context else 0
        self._attempt = context.attemptNumber() if context else 0
        self._tables = tables
        self._open: dict[str, tuple[Any, Path]] = {}

    def write(self, name: str, rows: pa.Table) -> None:
        import pyarrow.parquet as pq

        if not rows.num_rows:
            return
        directory, schema = self._tables[name]
        if name not in self._open:
            hidden = Path(directory) / f".part-{self._task:05d}-{self._attempt}.parquet"
            self._open[name] = (pq.ParquetWriter(hidden, schema), hidden)
        self._open[name][0].write_table(rows.select(schema.names).cast(schema))

    def close(self) -> None:
        for writer, hidden in self._open.values():
            writer.close()
            os.replace(hidden, hidden.with_name(f"part-{self._task:05d}.parquet"))
        self._open.clear()


def prepare_parts(tables: Mapping[str, tuple[str, pa.Schema]], within: Path) -> None:
    """The directories (inside ``within``) of the tables tasks write with :class:`TaskParts`, emptied: a plan made
    again replaces its tables whole."""
    for directory, _ in tables.values():
        remove_tree(Path(directory), within=within)
        Path(directory).mkdir(parents=True)


def finish_parts(tables: Mapping[str, tuple[str, pa.Schema]]) -> None:
    """A table no task wrote a row of gets one empty part with its schema, as a Spark write of no rows leaves."""
    import pyarrow.parquet as pq

    for directory, schema in tables.values():
        if not any(Path(directory).glob("part-*")):
            pq.write_table(schema.empty_table(), Path(directory) / "part-00000.parquet")


class TopicRows:
    """One plan table's rows looked up by topic inside a task, with no shuffle. Its Parquet files (each file a
    Spark reader reads: not hidden, not a checksum) are each sorted by topic (as :class:`TaskParts` and
    ``write_table`` write them), so the topic ranges of each file's row groups, read once from the footers, say
    where a topic's rows can be: only those row groups are read, and their rows filtered to the topic. A row group
    without statistics is read for every topic, and a file whose ranges are out of order is searched whole."""

    def __init__(self, directory: str, schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        self._columns = [*dict.fromkeys(["topic", *schema.names])]
        self._schema = schema
        self._files = []
        for path in sorted(p for p in Path(directory).glob("*") if is_table_file(p.name)):
            parquet = pq.ParquetFile(path)
            column = parquet.schema_arrow.get_field_index("topic")
            ranged, unranged = [], []
            for index in range(parquet.metadata.num_row_groups):
                stats = parquet.metadata.row_group(index).column(column).statistics
                if stats is not None and stats.has_min_max:
                    ranged.append((stats.min, stats.max, index))
                else:
                    unranged.append(index)
            in_order = all(ranged[i][0] >= ranged[i - 1][1] for i in range(1, len(ranged)))
            self._files.append(
                (parquet, ranged, [high for _, high, _ in ranged] if in_order else None, unranged)
            )

    def _row_groups(self, ranged: list, highs: list | None, topic: str) -> list[int]:
        """The row groups whose topic range holds ``topic``; in a file in order, consecutive from the first whose
        highest topic is not below it."""
        chosen = []
        for low, high, index in ranged[bisect.bisect_left(highs, topic) :] if highs is not None else ranged:
            if low > topic:
                if highs is not None:
                    break
                continue
            if high >= topic:
                chosen.append(index)
        return chosen

    def of(self, topic: str | None) -> pa.Table:
        """The rows of ``topic`` (None: the rows without one) with the schema asked for, in file order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        found = []
        for parquet, ranged, highs, unranged in self._files:
            if topic is None:  # rows without a topic: no range holds them
                chosen = list(range(parquet.metadata.num_row_groups))
            else:
                chosen = sorted(self._row_groups(ranged, highs, topic) + unranged)
            if chosen:
                rows = parquet.read_row_groups(chosen, columns=self._columns)
                mine = rows.filter(
                    pc.is_null(rows["topic"]) if topic is None else pc.equal(rows["topic"], topic)
                )
                found.append(mine.select(self._schema.names).cast(self._schema))
        return pa.concat_tables(found) if found else self._schema.empty_table()


def topic_tasks(frame: DataFrame, topics: int) -> int:
    """How many tasks share ``topics`` topics (or other units of work, as key erasure's ledgers): one per topic, at
    most the session's shuffle partitions (the knob docs/deployment.md has operators raise for a larger cluster),
    and never fewer than one."""
    partitions = int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions") or 1)
    return max(1, min(topics, partitions))
