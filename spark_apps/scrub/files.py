"""What a stored ledger's files hold, read in Spark tasks (``mapInArrow``: one task reads many ledgers, each with
pyarrow, so an unreadable file is a fact of its row, not a failed job): the rows in the Parquet footers, and from the
``ledgerId``, ``entryId`` and ``size`` columns the payload bytes, the smallest and largest entry id and how many
distinct positions (ledger and entry: a compacted ledger holds entries of several ledgers, whose ids repeat). A
tier object is read through ``housekeeping.store.tier.ObjectTier`` with the task's own credentials."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pyspark.sql import DataFrame, SparkSession

FACTS = (
    "location string, path string, rows bigint, payloadBytes bigint, minEntryId bigint, maxEntryId bigint, "
    "distinctPositions bigint, error string"
)
_EMPTY = {"rows": 0, "payloadBytes": 0, "minEntryId": None, "maxEntryId": None, "distinctPositions": 0}


def _summarise(tables: list) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tables:
        return dict(_EMPTY)
    table = pa.concat_tables(tables)
    if table.num_rows == 0:
        return dict(_EMPTY)
    ids = table.column("entryId")
    return {
        "rows": table.num_rows,
        "payloadBytes": int(pc.sum(table.column("size")).as_py() or 0),
        "minEntryId": pc.min(ids).as_py(),
        "maxEntryId": pc.max(ids).as_py(),
        "distinctPositions": table.group_by(["ledgerId", "entryId"]).aggregate([]).num_rows,
    }


def _read_local(directory, pq) -> list:
    """The entry ids and sizes of a ledger directory's Parquet files; an error naming the file that cannot be read.
    One ``ParquetFile`` per file, read on the task's thread: this runs once per stored ledger, and
    ``pq.read_table``'s dataset machinery costs more than the read itself."""
    import os

    try:
        with os.scandir(directory) as entries:
            names = sorted(
                e.name for e in entries if e.name.endswith(".parquet") and not e.name.startswith(".")
            )
    except FileNotFoundError:
        names = []
    if not names:
        raise ValueError(f"{directory} holds no Parquet file")
    tables = []
    for name in names:
        path = directory / name
        try:
            tables.append(
                pq.ParquetFile(path).read(columns=["ledgerId", "entryId", "size"], use_threads=False)
            )
        except Exception as exc:
            raise ValueError(f"{path} is not a readable ledger file (corrupt or truncated): {exc}") from exc
    return tables


def ledger_facts(
    root: str, tier_url: str | None, tier_endpoint: str | None
) -> Callable[[Iterator], Iterator]:
    def read(batches: Iterator) -> Iterator:
        from pathlib import Path

        import pyarrow as pa
        import pyarrow.parquet as pq

        from housekeeping.store.tier import ObjectTier

        tier = ObjectTier.of(tier_url, tier_endpoint) if tier_url else None
        for batch in batches:
            rows = []
            for location, path in zip(
                batch.column("location").to_pylist(), batch.column("path").to_pylist(), strict=True
            ):
                facts = {"location": location, "path": path, **_EMPTY, "error": None}
                try:
                    if location == "local":
                        tables = _read_local(Path(root) / path, pq)
                    elif tier is None:
                        raise ValueError("the object tier is not configured (HOUSEKEEPING_OFFLOAD_URL)")
                    else:
                        tables = [tier.read_ledger(path, columns=["ledgerId", "entryId", "size"])]
                    facts.update(_summarise(tables))
                except Exception as exc:  # every failure to read is the row's finding
                    facts["error"] = str(exc)
                rows.append(facts)
            yield pa.RecordBatch.from_pylist(
                rows,
                schema=pa.schema(
                    [
                        ("location", pa.string()),
                        ("path", pa.string()),
                        ("rows", pa.int64()),
                        ("payloadBytes", pa.int64()),
                        ("minEntryId", pa.int64()),
                        ("maxEntryId", pa.int64()),
                        ("distinctPositions", pa.int64()),
                        ("error", pa.string()),
                    ]
                ),
            )

    return read


def read_ledger_facts(
    spark: SparkSession, locations: DataFrame, root: str, tier: dict, partitions: int
) -> DataFrame:
    """Per (location, path) of ``locations``: what its files hold (``FACTS``)."""
    spread = locations.select("location", "path").repartition(max(1, partitions))
    return spread.mapInArrow(ledger_facts(root, tier.get("url"), tier.get("endpoint_url")), FACTS)
