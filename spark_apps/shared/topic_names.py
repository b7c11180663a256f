"""The gate's own reading of topic names: what a name says about its topic, from the name alone.

Pulsar decides by name whether a topic is a system topic and which partitioned topic a partition belongs to; the
rule has one definition, ``housekeeping.core.names``, which the snapshot applied for the planners. The gate applies it
again here to the names it checks instead of trusting the snapshot's or the planner's columns, so a wrong flag
upstream cannot certify a deletion or a cursor move on a system topic.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from housekeeping.engine.contract import table

NAME_FACTS = table(
    "topic_name_facts",
    "topic string!, namespace string, partitionedTopic string, isSystemTopic boolean, isSystemTopicName boolean",
)


# A topic's name is parsed once for its several actions (they come together, topic by topic): bounded, as a Python
# worker checks bucket after bucket.
@functools.lru_cache(maxsize=4096)
def _facts(name: str) -> tuple:
    from housekeeping.core.errors import InputError
    from housekeeping.core.names import TopicName

    try:
        parsed = TopicName.parse(name)
    except InputError:
        # Not a topic name (a tampered plan): no fact, so every check that needs one fails.
        return (name, None, None, None, None)
    return (
        name,
        str(parsed.namespace_name),
        parsed.partitioned_parent,
        parsed.is_system_topic,
        parsed.is_system_topic_name,
    )


def name_facts(name: str | None) -> dict:
    """:data:`NAME_FACTS`'s row of one name (every fact None when it is not a topic name)."""
    if name is None:
        return dict.fromkeys(NAME_FACTS.names)
    return dict(zip(NAME_FACTS.names, _facts(name), strict=True))


def topic_name_facts(spark: SparkSession, frames: Iterable[DataFrame]) -> DataFrame:
    """One row per distinct ``topic`` of ``frames``: its namespace, its partitioned topic (null: not a
    partition), ``isSystemTopic`` (``BrokerService#isSystemTopic``: no expiry, backlog quota or GC) and
    ``isSystemTopicName`` (``SystemTopicNames#isSystemTopic``: retention (0, 0) by default). Names are collected
    to the driver: one short string per topic, both ways as Arrow columns (as Row objects and tuples, the 48,618
    topics of a 100,000-topic trim plan took twice as long)."""
    import pyarrow as pa

    names: set[str] = set()
    for frame in frames:
        names.update(frame.select("topic").distinct().toArrow().column(0).to_pylist())
    facts = [_facts(name) for name in sorted(n for n in names if n is not None)]
    schema = NAME_FACTS.arrow_schema()
    columns = zip(*facts, strict=True) if facts else [[]] * len(schema)
    table = pa.table(
        [pa.array(values, field.type) for field, values in zip(schema, columns, strict=True)], schema
    )
    # The schema as well as the table: Spark Connect infers none from an empty table (no topic, e.g. no action).
    return spark.createDataFrame(table, NAME_FACTS.ddl())


def retention_default_fits_name() -> Column:
    """The snapshot's resolved retention agrees with the name: a topic ``SystemTopicNames#isSystemTopic`` names
    has retention (0, 0) unless a topic-level retention applies; any other topic never gets that default.
    Needs ``isSystemTopicName`` (from :func:`topic_name_facts`), ``retentionSource``, ``retentionTimeMs`` and
    ``retentionSizeBytes``; null when a fact is missing."""
    from housekeeping.core.policies import SYSTEM_TOPIC_RETENTION_SOURCE

    system_default = F.col("retentionSource") == F.lit(SYSTEM_TOPIC_RETENTION_SOURCE)
    topic_level = F.col("retentionSource").startswith("topic ")
    zero = (F.col("retentionTimeMs") == 0) & (F.col("retentionSizeBytes") == 0)
    return F.when(F.col("isSystemTopicName"), topic_level | (system_default & zero)).otherwise(
        ~system_default
    )


def retention_default_fits(topic: dict | None, system_topic_name: bool | None) -> bool:
    """:func:`retention_default_fits_name` over one topic's snapshot row and the name's ``isSystemTopicName``; false
    when the snapshot lacks the topic (None: what cannot be shown fails)."""
    from housekeeping.core.policies import SYSTEM_TOPIC_RETENTION_SOURCE

    if topic is None:
        return False
    source = topic["retentionSource"]
    system_default = source == SYSTEM_TOPIC_RETENTION_SOURCE
    if system_topic_name:
        zero = topic["retentionTimeMs"] == 0 and topic["retentionSizeBytes"] == 0
        return source.startswith("topic ") or (system_default and zero)
    return not system_default
