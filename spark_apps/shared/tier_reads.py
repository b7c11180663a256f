"""Reading offloaded ledgers from the object tier in Spark. Spark cannot read ``s3a://`` here (no hadoop-aws jar),
and a directory tier is read the same way for one code path: each task opens the tier with pyarrow.fs
(``housekeeping.store.tier.ObjectTier``, credentials from the task's own AWS environment) and yields the objects'
entries as Arrow batches (``mapInArrow``), one task per ledger. Each row carries ``dir``: the directory the ledger's
local copy had, so readers join a tier ledger's facts exactly as a local one's."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T


def _reader(url: str, endpoint_url: str | None, names: list[str]) -> Callable[[Iterator], Iterator]:
    def read(batches: Iterator) -> Iterator:
        import pyarrow as pa

        from housekeeping.store.tier import ObjectTier

        tier = ObjectTier.of(url, endpoint_url)
        for batch in batches:
            for key, directory in zip(
                batch.column("key").to_pylist(), batch.column("dir").to_pylist(), strict=True
            ):
                table = tier.read_ledger(key, columns=names)
                table = table.append_column("dir", pa.array([directory] * table.num_rows, pa.string()))
                yield from table.to_batches()

    return read


def read_tier_ledgers(
    spark: SparkSession, tier: dict[str, str | None], objects: list[tuple[str, str]], columns: T.StructType
) -> DataFrame:
    """The entries (``columns``) of the tier objects ``objects`` ((key, the ledger's local dir) pairs), with
    ``dir``."""
    schema = T.StructType([*columns.fields, T.StructField("dir", T.StringType(), True)])
    if not objects:
        return spark.createDataFrame([], schema)
    keys = spark.createDataFrame(objects, "key string, dir string").repartition(len(objects))
    return keys.mapInArrow(_reader(str(tier["url"]), tier.get("endpoint_url"), columns.fieldNames()), schema)
