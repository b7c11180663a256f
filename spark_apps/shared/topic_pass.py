"""One Spark pass per plan: a task per snapshot bucket runs the mechanism's rule topic by topic.

The snapshot's tables are clustered by topic (``housekeeping.engine.parquet_rows.BucketedParquetRows``: row group ``b``
of every table holds the rows of bucket ``b``'s topics). A plan is then one Spark job of one stage: task ``b`` reads
row group ``b`` of each table the rule needs with pyarrow, hands each topic's rows to the rule (a plain function
over one topic, as Pulsar's own loop reads, that the unit tests call without Spark), writes its part file of every
plan table (JSON lines, as Spark's writer writes them: ``plan/<table>/part-<b>.json``) and returns its share of the
summary, which the driver adds up. No shuffle, no join, no count: what cost a plan of 25-40 stages before is one
stage of scheduling.

A run snapshotted before the snapshot was clustered (no ``snapshotBuckets`` in run.json, or JSON-lines tables) is
read as one bucket.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from housekeeping.core.errors import InputError
from housekeeping.engine.contract import ACTIONS, HOLDS, SNAPSHOT_TABLES, TOPICS, Table, topic_bucket
from housekeeping.engine.documents import RunInfo, read_run_info
from housekeeping.engine.gate import CheckFrame, Expectation, must_be_true, offending_rows
from housekeeping.engine.run_dir import RunDir
from housekeeping.engine.snapshot_reads import snapshot_file
from housekeeping.store.fs import remove_tree
from spark_apps.shared.holds import HOLD_CHECKS, hold_check_rows
from spark_apps.shared.rows import Row, json_lines

# What check_pass adds to each routed row (not the plan's columns).
ROUTING_COLUMNS = ("bucket", "marker", "planTable", "planRow")

# A task's tally key carrying the bad input it met instead of its share of the summary.
BAD_INPUT = "badInput"
# A gate task's frame name saying its bucket's part files are not as the planner writes them (read_bucket_plan).
NOT_AS_PLANNED = "notAsPlanned"

# A rule: (the topic's row of the topics table, its rows of every other table read, the run's facts) -> rows per plan
# table name.
Rule = Callable[[Row, Mapping[str, list[Row]], RunInfo], Mapping[str, list[Row]]]
# A task's share of the summary from the rows it decided: numbers (or nested dicts of numbers) the driver adds up.
Tally = Callable[[Mapping[str, list[Row]]], dict[str, Any]]


def bucket_count(info: RunInfo) -> int:
    return int(info.snapshot_buckets or 1)


def read_bucket(run_dir: str | Path, info: RunInfo, table: Table, bucket: int) -> list[Row]:
    """The rows of ``bucket`` of a snapshot table (all of it, for every bucket, when the table has no topic column;
    all of it in bucket 0 when the run was snapshotted unclustered)."""
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    path = snapshot_file(run_dir, table)
    if "topic" not in table.names:
        return (pj.read_json(path) if path.suffix == ".jsonl" else pq.read_table(path)).to_pylist()
    if path.suffix == ".jsonl":
        return pj.read_json(path).to_pylist() if bucket == 0 else []
    if not info.snapshot_buckets:
        return pq.read_table(path).to_pylist() if bucket == 0 else []
    buckets, parquet = bucket_count(info), pq.ParquetFile(path)
    if parquet.num_row_groups != buckets:
        # Not clustered as run.json says (a table rewritten by another writer): every row read, this bucket's kept.
        return [r for r in parquet.read().to_pylist() if topic_bucket(r["topic"], buckets) == bucket]
    rows = parquet.read_row_group(bucket).to_pylist()
    misplaced = {t for t in {r["topic"] for r in rows} if topic_bucket(t, buckets) != bucket}
    if misplaced:
        raise ValueError(
            f"{path}: row group {bucket} holds topics of other buckets ({sorted(misplaced)[:3]}): the table is not "
            "clustered by topic as its run.json says"
        )
    return rows


def by_topic(rows: list[Row]) -> dict[Any, list[Row]]:
    """Rows grouped by their ``topic`` (None included), each group in the rows' order."""
    grouped: dict[Any, list[Row]] = {}
    for row in rows:
        grouped.setdefault(row["topic"], []).append(row)
    return grouped


@dataclass(frozen=True)
class BucketRows:
    """One bucket of a run's snapshot as a gate's checks read it: the topics by name, and every other table read
    grouped by topic."""

    topics: dict[str, Row]
    tables: dict[str, dict[str, list[Row]]]

    @classmethod
    def read(cls, run_dir: str | Path, info: RunInfo, reads: Sequence[str], bucket: int) -> BucketRows:
        return cls(
            {t["topic"]: t for t in read_bucket(run_dir, info, TOPICS, bucket)},
            {name: by_topic(read_bucket(run_dir, info, SNAPSHOT_TABLES[name], bucket)) for name in reads},
        )

    def of(self, table: str, topic: str | None) -> list[Row]:
        return self.tables[table].get(topic, []) if topic is not None else []


def topics_of_bucket(
    sources: Mapping[str, str | Path], info: RunInfo, reads: Sequence[str], bucket: int
) -> Iterator[tuple[Row, dict[str, list[Row]]]]:
    """Each topic of the bucket (the topics table's order) with its rows of every table of ``reads``;
    ``sources``: the run directory each table is read from (a sweep's points share all but their topics)."""
    tables = {
        name: by_topic(read_bucket(sources[name], info, SNAPSHOT_TABLES[name], bucket)) for name in reads
    }
    for topic in read_bucket(sources[TOPICS.name], info, TOPICS, bucket):
        yield topic, {name: rows.get(topic["topic"], []) for name, rows in tables.items()}


def add_tallies(total: dict[str, Any], part: Mapping[str, Any]) -> dict[str, Any]:
    """``part`` added into ``total``: numbers summed, nested dicts merged the same way."""
    for key, value in part.items():
        if isinstance(value, Mapping):
            total[key] = add_tallies(dict(total.get(key) or {}), value)
        else:
            total[key] = total.get(key, 0) + value
    return total


def write_part(path: Path, rows: list[Row], table: Table) -> None:
    """One task's part file, renamed into place: a retried task writes the same file again. Rows in the order the
    rule decided them (topics by name within the bucket, each topic's rows as the rule emits them): the same
    snapshot writes the same bytes."""
    for row in rows:
        table.check(row)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_bytes(json_lines(rows))
    partial.replace(path)


def decide_bucket(
    sources: Mapping[str, str | Path], info: RunInfo, reads: Sequence[str], rule: Rule, bucket: int,
    tables: Sequence[str] = (),
) -> dict[str, list[Row]]:  # fmt: skip
    """``rule`` over every topic of the bucket: its rows per plan table (``tables`` present even when empty)."""
    decided: dict[str, list[Row]] = {name: [] for name in tables}
    for topic, rows in topics_of_bucket(sources, info, reads, bucket):
        for name, table_rows in rule(topic, rows, info).items():
            decided.setdefault(name, []).extend(table_rows)
    return decided


def _plan_bucket(
    run_dir: str, info: RunInfo, rule: Rule, reads: Sequence[str], outputs: Sequence[Table],
    tally: Tally, bucket: int,
) -> dict[str, Any]:  # fmt: skip
    sources = {name: run_dir for name in (TOPICS.name, *reads)}
    decided = decide_bucket(sources, info, reads, rule, bucket, [table.name for table in outputs])
    run = RunDir(run_dir)
    for table in outputs:
        write_part(run.plan_table(table) / part_file(bucket), decided[table.name], table)
    return tally(decided)


def plan_pass(
    spark, run_dir: str | Path, info: RunInfo, *, rule: Rule, reads: Sequence[str],
    outputs: Sequence[Table], tally: Tally,
) -> dict[str, Any]:  # fmt: skip
    """Plan the run in one Spark job: ``rule`` over every topic, ``outputs`` written, the tallies added up. The
    plan tables are emptied first (a plan planned again replaces its files)."""
    import pyarrow as pa

    run = RunDir(run_dir)
    for table in outputs:
        remove_tree(run.plan_table(table), within=run.path)
        run.plan_table(table).mkdir(parents=True)
    buckets = bucket_count(info)
    path, frozen = str(run.path), info  # a frozen RunInfo: shipped to the tasks as it is

    def plan_buckets(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for bucket in batch.column("id").to_pylist():
                try:
                    part = _plan_bucket(path, frozen, rule, reads, outputs, tally, bucket)
                except (
                    InputError
                ) as error:  # bad input met in a task (a damaged ledger file): named on the driver
                    part = {BAD_INPUT: str(error)}
                yield pa.RecordBatch.from_pylist([{"bucket": bucket, "tally": json.dumps(part)}])

    rows = spark.range(0, buckets, 1, buckets).mapInArrow(plan_buckets, "bucket long, tally string").collect()
    parts = [json.loads(row["tally"]) for row in sorted(rows, key=lambda r: r["bucket"])]
    errors = [part[BAD_INPUT] for part in parts if BAD_INPUT in part]
    if errors:
        raise InputError(
            errors[0] + (f" (and {len(errors) - 1} more bucket(s) of bad input)" if len(errors) > 1 else "")
        )
    total: dict[str, Any] = {}
    for part in parts:
        add_tallies(total, part)
    return total


def measure_pass(
    spark, run_dirs: Sequence[str | Path], *, rule: Rule, reads: Sequence[str], measure: Tally
) -> list[dict[str, Any]]:
    """A policy sweep's points in one Spark job (``spark_apps.sweep``): ``rule`` over every topic of every point
    (each point's topics from its own directory, the other tables from the first point's), ``measure`` of what it
    decided added up per point. Nothing is written."""
    import pyarrow as pa

    dirs = [str(d) for d in run_dirs]
    infos = [read_run_info(d) for d in dirs]
    buckets = bucket_count(infos[0])

    def measure_tasks(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for task in batch.column("id").to_pylist():
                point, bucket = divmod(task, buckets)
                sources = {name: dirs[0] for name in reads} | {TOPICS.name: dirs[point]}
                part = measure(decide_bucket(sources, infos[point], reads, rule, bucket))
                yield pa.RecordBatch.from_pylist([{"task": task, "tally": json.dumps(part)}])

    tasks = len(dirs) * buckets
    rows = spark.range(0, tasks, 1, min(tasks, max(buckets, 1))).mapInArrow(
        measure_tasks, "task long, tally string"
    )
    points: list[dict[str, Any]] = [{} for _ in dirs]
    for row in sorted(rows.collect(), key=lambda r: r["task"]):
        add_tallies(points[row["task"] // buckets], json.loads(row["tally"]))
    return points


def ledgers_per_namespace(decisions: list[Row], decision: str) -> dict[str, dict[str, int]]:
    """The ledgers and bytes per namespace of the ledger decisions that are ``decision`` (a bucket's share of a
    ledger plan's summary)."""
    per_namespace: dict[str, dict[str, int]] = {}
    for row in decisions:
        if row["decision"] == decision:
            counts = per_namespace.setdefault(row["namespace"], {"ledgers": 0, "bytes": 0})
            counts["ledgers"] += 1
            counts["bytes"] += row["size"]
    return per_namespace


def namespace_measures(decided: Mapping[str, list[Row]]) -> dict[str, Any]:
    """A sweep's measure (:func:`measure_pass`) of a rule that returns ``measures`` rows: each namespace's numbers
    added up."""
    per_namespace: dict[str, Any] = {}
    for row in decided.get("measures", []):
        add_tallies(
            per_namespace.setdefault(row["namespace"], {}), {k: v for k, v in row.items() if k != "namespace"}
        )
    return per_namespace


def boolean_columns(checks: Sequence[str]) -> str:
    """A check frame's boolean columns, one per check, in a table spec (``contract.table``)."""
    return ", ".join(f"{check} boolean" for check in checks)


def pandas_frame(table: Table, rows: list[Row]) -> Any:
    """Rows as a pandas frame of ``table``'s columns (no row: the columns still there), for Great Expectations."""
    import pyarrow as pa

    return pa.Table.from_pylist(rows, table.arrow_schema()).to_pandas()


@dataclass(frozen=True)
class BucketPlan:
    """The plan's rows of one bucket's topics, as the gate's pass routed them: the actions, and the rows of each
    other plan table the gate asked for (by table name)."""

    actions: list[Row]
    tables: Mapping[str, list[Row]]


# A gate's checker: (bucket, the plan's rows of the bucket's topics, the run directory, the run's facts) -> rows per
# check frame.
Checker = Callable[[int, BucketPlan, str, RunInfo], Mapping[str, list[Row]]]


def _ipc(table: Any) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _routed_plan(spark, run_dir: str | Path, buckets: int, routed: Sequence[Table]) -> Any:
    """The plan's actions (as read) and the rows of ``routed`` (each as its JSON), each with its topic's bucket, and
    a marker row per bucket, partitioned by bucket: bucket b in task b alone (:func:`partition_keys`)."""
    from pyspark.sql import functions as F

    from spark_apps.shared.io import read_actions, read_table

    rows = read_actions(spark, run_dir).withColumn("planTable", F.lit(None).cast("string"))
    for plan_table in routed:
        frame = read_table(spark, run_dir, plan_table)
        rows = rows.unionByName(
            frame.select(
                "topic",
                F.lit(plan_table.name).alias("planTable"),
                F.to_json(F.struct(*frame.columns)).alias("planRow"),
            ),
            allowMissingColumns=True,
        )
    bucket_of = (F.crc32(F.coalesce(F.col("topic"), F.lit("")).cast("binary")) % buckets).cast("long")
    markers = spark.range(0, buckets, 1, 1).select(F.col("id").alias("bucket"), F.lit(True).alias("marker"))
    # Longs, as partition_keys hashed them (a literal of a small Python int is an int, which hashes otherwise).
    keys = F.array(*(F.lit(key).cast("long") for key in partition_keys(spark, buckets)))
    return (
        rows.withColumn("bucket", bucket_of)
        .withColumn("marker", F.lit(False))
        .unionByName(markers, allowMissingColumns=True)
        .withColumn("route", F.element_at(keys, (F.col("bucket") + 1).cast("int")))
        .repartition(buckets, "route")
        .drop("route")
    )


def partition_keys(spark, partitions: int) -> list[int]:
    """For each partition p of a repartition into ``partitions`` by a long column, a value that lands in p (Spark's
    hash partitioning: pmod(hash(value), partitions), computed by Spark itself): repartitioned by the key of its
    bucket, each bucket is one task's alone. By the bucket number itself, Spark's hash puts several buckets in
    some tasks and none in others, and such a task holds all their rows at once."""
    from pyspark.sql import functions as F

    keys: dict[int, int] = {}
    candidates = 64 * partitions
    while len(keys) < partitions:
        hashed = spark.range(0, candidates, 1, 1).select(
            "id", F.pmod(F.hash("id"), F.lit(partitions)).alias("partition")
        )
        for row in sorted(hashed.collect(), key=lambda r: r["id"]):
            keys.setdefault(int(row["partition"]), int(row["id"]))
        candidates *= 16
    return [keys[p] for p in range(partitions)]


def _bucket_plans(batches: Iterator[Any], names: Mapping[str, Sequence[str]]) -> dict[int, BucketPlan]:
    """A task's routed rows (:func:`_routed_plan`) as each bucket's plan (a bucket with only its marker: empty)."""
    plans: dict[int, BucketPlan] = {}
    for batch in batches:
        for row in batch.to_pylist():
            bucket, marker, plan_table, plan_row = (row.pop(k, None) for k in ROUTING_COLUMNS)
            plan = plans.setdefault(bucket, BucketPlan([], {name: [] for name in names}))
            if marker:
                continue
            if plan_table is None:
                plan.actions.append(row)
            else:
                parsed = json.loads(plan_row)
                plan.tables[plan_table].append({c: parsed.get(c) for c in names[plan_table]})
    return plans


def part_file(bucket: int) -> str:
    """The name of bucket ``bucket``'s part file of a plan table, as :func:`plan_pass` writes it."""
    return f"part-{bucket:05d}.json"


def planned_parts(run_dir: str | Path, buckets: int, tables: Sequence[Table]) -> dict[str, list[str]] | None:
    """Whether each of ``tables`` is, as Spark's reader sees its directory, the part files :func:`plan_pass` writes:
    one per bucket, named :func:`part_file`, and any further ones numbered past the buckets (a planner's driver
    writes the rows it decides itself there: GC's partitioned metadata). Then task b reads bucket b's rows from
    file b and from the further files (:func:`read_bucket_plan`). Returns each table's further files; None for a
    plan written otherwise (another writer, a file added or renamed), which Spark reads and routes."""
    run = RunDir(run_dir)
    further: dict[str, list[str]] = {}
    for table in tables:
        directory = run.plan_table(table)
        if not directory.is_dir():
            return None
        # Spark's file listing skips names starting with "_" or "." (markers, a writer's partial files).
        names = {p.name for p in directory.iterdir() if not p.name.startswith(("_", "."))}
        numbers = {
            int(name[5:10]) for name in names if name[5:10].isdigit() and part_file(int(name[5:10])) == name
        }
        if len(numbers) != len(names) or not numbers >= set(range(buckets)):
            return None
        further[table.name] = [part_file(n) for n in sorted(numbers) if n >= buckets]
    return further


def _long(bits: int) -> Callable[[Any], bool]:
    return lambda v: type(v) is int and -(2**bits) <= v < 2**bits


_BIGINT = _long(63)
# Whether a JSON value (as orjson parses it) is read by Spark's JSON reader into a column of the type as itself, with
# no conversion; per column type (a type missing here is never plain).
_PLAIN_VALUE: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: type(v) is str,
    "boolean": lambda v: type(v) is bool,
    "bigint": _BIGINT,
    "int": _long(31),
    "double": lambda v: type(v) is float or _BIGINT(v),
}


def _strict_rows(path: Path, table: Table, buckets: int, bucket: int, *, shared: bool) -> list[Row] | None:
    """The rows of ``bucket``'s topics in one part file, read as Spark's JSON reader with the table's schema reads
    them, or None when the file holds anything whose reading is not plain: a line that is not one JSON object of
    the table's columns with values of their types, a byte Spark's line reader splits on other than the newline
    ending each line, a row naming no topic, or (in the bucket's own file, not ``shared`` by every bucket) a row of
    another bucket's topic (a row routed by Spark would meet its topic elsewhere)."""
    import orjson

    data = path.read_bytes()
    if b"\r" in data or (data and not data.endswith(b"\n")):
        return None
    plain = {c.name: _PLAIN_VALUE.get(c.type, lambda v: False) for c in table.columns}
    doubles = [c.name for c in table.columns if c.type == "double"]
    # Every column, in the table's order; a column a line leaves out is null, as Spark reads it.
    every_column = dict.fromkeys(table.names)
    rows: list[Row] = []
    for line in data.split(b"\n")[:-1]:
        try:
            raw = orjson.loads(line)
        except orjson.JSONDecodeError:
            return None
        if type(raw) is not dict:
            return None
        for name, value in raw.items():
            if name not in plain or (value is not None and not plain[name](value)):
                return None
        row = {**every_column, **raw}
        for name in doubles:
            if row[name] is not None:
                row[name] = float(row[name])
        topic = row.get("topic")
        if type(topic) is not str:
            return None
        if topic_bucket(topic, buckets) == bucket:
            rows.append(row)
        elif not shared:
            return None
    return rows


def read_bucket_plan(
    run_dir: str | Path, buckets: int, bucket: int, routed: Sequence[Table], further: Mapping[str, list[str]]
) -> BucketPlan | None:
    """Bucket ``bucket``'s plan read from its own part file of each table and its rows of the ``further`` ones
    (:func:`planned_parts`), as Spark would route them; None when a file's reading is not plain
    (:func:`_strict_rows`): the pass then routes with Spark."""
    run = RunDir(run_dir)
    read: dict[str, list[Row]] = {}
    for table in (ACTIONS, *routed):
        directory = run.plan_table(table)
        files = [(part_file(bucket), False), *((name, True) for name in further[table.name])]
        for name, shared in files:
            rows = _strict_rows(directory / name, table, buckets, bucket, shared=shared)
            if rows is None:
                return None
            read.setdefault(table.name, []).extend(rows)
    actions = read.pop(ACTIONS.name)
    return BucketPlan(actions, read)


@dataclass(frozen=True)
class CheckedFrames:
    """What a gate's pass (:func:`check_pass`) brings back: each frame as one Arrow table (of a frame that has
    expectations, only its offending rows: :func:`housekeeping.engine.gate.offending_rows`), each frame's row
    count, and the expectations each frame is validated with."""

    tables: dict[str, Any]
    rows: dict[str, int]
    expectations: Mapping[str, list[Expectation]]

    def check(self, name: str) -> CheckFrame:
        """Frame ``name`` as Great Expectations validates it: its offending rows, counted as the whole frame."""
        return CheckFrame(name, self.tables[name], list(self.expectations[name]), rows=self.rows[name])


def _shipped_rows(rows: list[Row], expectations: Sequence[Expectation] | None) -> list[Row]:
    if expectations is None:
        return rows
    offending = offending_rows(rows, list(expectations), "topic")
    return rows if offending is None else offending


def _checked_bucket(
    bucket: int, plan: BucketPlan, checker: Checker, run_dir: str, info: RunInfo,
    schemas: Mapping[str, Any], validated: Mapping[str, list[Expectation]],
) -> Any:  # fmt: skip
    """One bucket's check frames as :func:`check_pass`'s tasks send them: a row per frame (its row count, and the
    rows that could fail its expectations as Arrow IPC), or one row of the bad input the bucket met."""
    import pyarrow as pa

    try:
        checked = {
            **checker(bucket, plan, run_dir, info),
            HOLD_CHECKS.name: hold_check_rows(plan.actions, read_bucket(run_dir, info, HOLDS, bucket)),
        }
    except InputError as error:  # bad input met in a task (a damaged ledger file): named on the driver
        return pa.RecordBatch.from_pylist(
            [{"bucket": bucket, "frame": BAD_INPUT, "rows": 0, "data": str(error).encode()}]
        )
    return pa.RecordBatch.from_pylist(
        [
            {
                "bucket": bucket,
                "frame": name,
                "rows": len(checked.get(name, [])),
                "data": _ipc(
                    pa.Table.from_pylist(_shipped_rows(checked.get(name, []), validated.get(name)), schema)
                ),
            }
            for name, schema in schemas.items()
        ]
    )


def check_pass(
    spark, run_dir: str | Path, info: RunInfo, *, checker: Checker, frames: Sequence[Table],
    expectations: Mapping[str, list[Expectation]], routed: Sequence[Table] = (),
) -> CheckedFrames:  # fmt: skip
    """A gate's check frames in one Spark job: ``checker`` per bucket over the plan's rows of the bucket's topics and
    the bucket's snapshot rows. Every bucket is visited, with or without actions (a check that something due was
    planned needs all of them).

    Where the plan's rows come from: a plan as :func:`plan_pass` writes it (:func:`planned_parts`) is read a
    bucket's own part files per task, with no shuffle. Any other plan (a file added, a row whose reading is not
    plain or whose topic is of another bucket: :func:`read_bucket_plan`) is read apart from the planner's layout:
    by Spark's JSON reader, every row routed to its topic's bucket (``crc32`` of the name:
    :func:`housekeeping.engine.contract.topic_bucket`, so an action in any file meets its topic). Both give each
    bucket the same rows.

    ``routed``: other plan tables (with a ``topic`` column) read the same way. ``frames``: the check frames
    ``checker`` returns rows of; the pass adds ``holds`` (:func:`spark_apps.shared.holds.hold_check_rows`: no
    deleting or cursor-moving action on a held topic). ``expectations``: each validated frame's; a bucket ships
    only the rows of such a frame that could fail one (a topic's rows are all in its bucket, so a repeated key is
    seen there), and every frame's row count. A frame without expectations (figures the driver adds up) comes
    whole."""
    import pyarrow as pa

    buckets = bucket_count(info)
    path, frozen = str(RunDir(run_dir).path), info
    schemas = {table.name: table.arrow_schema() for table in (*frames, HOLD_CHECKS)}
    validated = {**expectations, HOLD_CHECKS.name: must_be_true("not_held")}
    names = {plan_table.name: plan_table.names for plan_table in routed}
    result_schema = "bucket long, frame string, rows long, data binary"
    further = planned_parts(path, buckets, (ACTIONS, *routed))

    def checked_batch(bucket: int, plan: BucketPlan) -> Any:
        return _checked_bucket(bucket, plan, checker, path, frozen, schemas, validated)

    def check_own_parts(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for bucket in batch.column("id").to_pylist():
                plan = read_bucket_plan(path, buckets, bucket, routed, further)
                if plan is None:
                    yield pa.RecordBatch.from_pylist(
                        [{"bucket": bucket, "frame": NOT_AS_PLANNED, "rows": 0, "data": b""}]
                    )
                    return
                yield checked_batch(bucket, plan)

    def check_routed(batches: Iterator[Any]) -> Iterator[Any]:
        for bucket, plan in sorted(_bucket_plans(batches, names).items()):
            yield checked_batch(bucket, plan)

    collected = None
    if further is not None:
        collected = spark.range(0, buckets, 1, buckets).mapInArrow(check_own_parts, result_schema).collect()
        if any(row["frame"] == NOT_AS_PLANNED for row in collected):
            collected = None
    if collected is None:
        routed_rows = _routed_plan(spark, run_dir, buckets, routed)
        collected = routed_rows.mapInArrow(check_routed, result_schema).collect()
    collected = sorted(collected, key=lambda r: r["bucket"])
    bad = [row["data"].decode() for row in collected if row["frame"] == BAD_INPUT]
    if bad:
        raise InputError(bad[0])
    parts: dict[str, list[Any]] = {name: [] for name in schemas}
    rows = dict.fromkeys(schemas, 0)
    for row in collected:
        parts[row["frame"]].append(pa.ipc.open_stream(row["data"]).read_all())
        rows[row["frame"]] += row["rows"]
    tables = {
        name: pa.concat_tables(tables) if tables else schema.empty_table()
        for (name, schema), tables in zip(schemas.items(), parts.values(), strict=True)
    }
    return CheckedFrames(tables, rows, validated)
