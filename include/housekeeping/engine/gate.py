"""The quality gate's runner: Great Expectations suites over Spark DataFrames, with an ephemeral context.

Each mechanism's gate builds *check frames* (one row per planned action, with boolean columns that
re-derive an invariant from the snapshot) and a suite per frame; this module validates them, writes
``gate/result.json`` (success, the plan digest it signed, every expectation's outcome with a sample of
the offending rows) and says whether apply may run.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from html import escape as html_escape
from pathlib import Path
from typing import Any

from housekeeping.core.errors import GateRejected, PlanNotValidated
from housekeeping.engine.documents import GateResult, Outcome, read_gate_result, write_document
from housekeeping.engine.plan import plan_digest
from housekeeping.engine.run_dir import RunDir


@dataclass(frozen=True)
class Expectation:
    """One expectation a check frame must meet, as data: the name of its class in ``great_expectations.expectations``
    and its arguments. GX's object is built when the gate validates (:meth:`build`), not when the check frames are
    built, so a gate process computes its frames while Great Expectations loads on a thread of its own
    (:func:`start_loading_great_expectations`; its import costs about as much as a small gate's queries)."""

    kind: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        import great_expectations.expectations as gxe

        expectation_class = getattr(gxe, self.kind, None)
        if expectation_class is None:
            raise ValueError(f"great_expectations.expectations has no expectation named {self.kind!r}")
        return expectation_class(**self.arguments)


def expect(kind: str, **arguments: Any) -> Expectation:
    """``expect("ExpectColumnValuesToBeInSet", column="action", value_set=[...])``: GX's class name and arguments."""
    return Expectation(kind, arguments)


@dataclass
class CheckFrame:
    """A DataFrame to validate and the expectations it must meet."""

    name: str
    frame: Any  # a pyspark.sql.DataFrame, a pyarrow.Table or a pandas DataFrame
    expectations: list[Expectation] = field(default_factory=list)
    # A frame that can hold more than PANDAS_ROWS rows (one per entry, not per topic or ledger): computed once
    # first, then brought to the driver only if it is small, rather than computed for the driver and, when too
    # large, once more (a frame of every kept entry would be computed twice).
    materialize_first: bool = False
    # The check frame's row count when ``frame`` holds only its offending rows (:func:`offending_rows`): the
    # verdict's row counts and Data Docs' percentages are of this many rows.
    rows: int | None = None


# Expectations judged row by row, for which :func:`offending_rows` keeps every row they could find unexpected.
_IN_SET, _BETWEEN = "ExpectColumnValuesToBeInSet", "ExpectColumnValuesToBeBetween"
_UNIQUE = ("ExpectColumnValuesToBeUnique", "ExpectCompoundColumnsToBeUnique")


def offending_rows(
    rows: list[dict[str, Any]], expectations: list[Expectation], local_key: str
) -> list[dict[str, Any]] | None:
    """The rows of a check frame's share (a snapshot bucket's) that any of ``expectations`` could count as
    unexpected, in their order: a value outside the set or the bounds (a null included), a row whose unique key
    another row of the share repeats. Great Expectations then validates these rows alone: its counts and samples
    are those of the whole frame, and a frame whose checks all hold comes to the driver empty. None (keep every
    row) when an expectation cannot be judged by rows of one share: another kind, a ``mostly``, a unique key
    without ``local_key`` (the column the shares are split by, so only a key holding it repeats within one)."""
    offending = [False] * len(rows)
    for expectation in expectations:
        arguments = expectation.arguments
        if "mostly" in arguments:
            return None
        if expectation.kind == _IN_SET:
            column, allowed = arguments["column"], arguments["value_set"]
            for i, row in enumerate(rows):
                value = row.get(column)
                offending[i] |= value is None or value not in allowed
        elif expectation.kind == _BETWEEN:
            column, low, high = arguments["column"], arguments.get("min_value"), arguments.get("max_value")
            for i, row in enumerate(rows):
                value = row.get(column)
                offending[i] |= value is None or not (
                    (low is None or value >= low) and (high is None or value <= high)
                )
        elif expectation.kind in _UNIQUE:
            key = arguments.get("column_list") or [arguments["column"]]
            if local_key not in key:
                return None
            seen: dict[tuple, int] = {}
            keys = [tuple(row.get(c) for c in key) for row in rows]
            for value in keys:
                seen[value] = seen.get(value, 0) + 1
            for i, value in enumerate(keys):
                offending[i] |= seen[value] > 1
        else:
            return None
    return [row for row, keep in zip(rows, offending, strict=True) if keep]


def must_be_true(*columns: str) -> list[Expectation]:
    return [expect("ExpectColumnValuesToBeInSet", column=column, value_set=[True]) for column in columns]


def one_row_each(key: list[str], *checks: str) -> list[Expectation]:
    """A per-action check frame's expectations: one row per ``key`` (a ledger, a cursor of the topic), every one of
    ``checks`` true."""
    return [expect("ExpectCompoundColumnsToBeUnique", column_list=key), *must_be_true(*checks)]


def known_actions(action_names: Any) -> Expectation:
    """Every planned action is one the mechanism declares."""
    return expect("ExpectColumnValuesToBeInSet", column="action", value_set=list(action_names))


def start_loading_great_expectations() -> None:
    """Import Great Expectations on a daemon thread while the caller computes its check frames (Spark work that
    waits on the JVM or the Connect server, the GIL released). The gate's own import then finds the modules loaded,
    or waits on Python's import lock for the thread to finish them; an import error is raised there, not here.
    Call it after the process has imported pandas and pyarrow (its Spark session does), so that the two threads
    do not import the same packages at once."""
    if "great_expectations.expectations" in sys.modules:
        return
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")

    def load() -> None:
        try:
            import great_expectations.expectations  # noqa: F401
        except Exception:  # raised again, with its traceback, by the gate's own import
            pass

    threading.Thread(target=load, name="load-great-expectations", daemon=True).start()


# A check frame has one row per planned action (or topic, namespace); up to this many rows it is brought to the
# driver by one query and validated there with Great Expectations' pandas engine, which computes each expectation
# without a Spark job of its own. A larger frame is materialized once and validated on Spark where it is.
PANDAS_ROWS = 1_000_000


def _is_spark(frame: Any) -> bool:
    return hasattr(frame, "toPandas")


def _is_arrow(frame: Any) -> bool:
    import pyarrow as pa

    return isinstance(frame, pa.Table)


# The arguments of an expectation that name the columns it reads.
_COLUMN_ARGUMENTS = ("column", "column_A", "column_B", "column_list")


def _validated_columns(expectations: list[Expectation]) -> list[str] | None:
    """The columns ``expectations`` read (None when one reads the whole table)."""
    columns: dict[str, None] = {}
    for expectation in expectations:
        named = [expectation.arguments[a] for a in _COLUMN_ARGUMENTS if a in expectation.arguments]
        if not named:
            return None
        for value in named:
            columns.update(dict.fromkeys(value if isinstance(value, list | tuple) else [value]))
    return list(columns)


def _arrow_to_pandas(table: Any, expectations: list[Expectation]) -> Any:
    """An Arrow check frame as the pandas frame GX validates: only the columns its expectations read, text as
    categories (a check frame of a million topics repeats each topic's name across its rows: as Python strings
    they were most of the gate's memory). The same values, nulls and row count, so the same outcomes."""
    columns = _validated_columns(expectations)
    if columns is not None:
        table = table.select([c for c in table.column_names if c in columns])
    return table.to_pandas(strings_to_categorical=True)


def _to_validate(
    frame: Any, materialize: Callable[[Any], Any], materialize_first: bool = False,
    expectations: list[Expectation] | None = None,
) -> Any:  # fmt: skip
    """The frame GX validates: a Spark frame's rows as pandas when they are few (one query computes the check's
    joins and brings the rows), else the frame computed once (GX's metrics each run a query over it); an Arrow
    table as :func:`_arrow_to_pandas` converts it. ``materialize_first``: computed once before its rows are
    counted (:attr:`CheckFrame.materialize_first`)."""
    if _is_arrow(frame):
        return _arrow_to_pandas(frame, expectations or [])
    if not _is_spark(frame):
        return frame
    if materialize_first:
        computed = materialize(frame)
        if computed.count() > PANDAS_ROWS:
            return computed
        return computed.toArrow().to_pandas()
    # Through Arrow (columnar batches), not the session's default toPandas, which without Arrow builds a Python
    # Row object per record first (benchmarks/README: the 100,000-topic runs before and after).
    table = frame.limit(PANDAS_ROWS + 1).toArrow()
    if table.num_rows > PANDAS_ROWS:
        return materialize(frame)
    return table.to_pandas()


def _of_whole_frame(result: Any, rows: int) -> None:
    """A validation of a check frame's offending rows restated for the whole frame of ``rows`` rows: its element
    count and the percentages computed from it (the unexpected and missing counts are the whole frame's already:
    every such row is there)."""
    for item in result.results:
        counts = item.result
        if "element_count" not in counts:
            continue
        missing, unexpected = int(counts.get("missing_count") or 0), int(counts.get("unexpected_count") or 0)
        present = rows - missing
        counts["element_count"] = rows
        for key, value in (
            ("missing_percent", 100.0 * missing / rows if rows else None),
            ("unexpected_percent", 100.0 * unexpected / present if present else None),
            ("unexpected_percent_total", 100.0 * unexpected / rows if rows else None),
            ("unexpected_percent_nonmissing", 100.0 * unexpected / present if present else None),
        ):
            if key in counts:
                counts[key] = value


def start_plan_digest(run_dir: Path) -> Future[str]:
    """The plan's digest (:func:`plan_digest`) computed on a thread of its own from the gate's start, for
    :func:`run_gate` to record: the plan as the checks began to read it, so a plan rewritten under a running gate
    matches no passed gate and apply refuses it. On its thread the hashing waits on no check."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plan-digest")
    try:
        return executor.submit(plan_digest, run_dir)
    finally:
        executor.shutdown(wait=False)


def run_gate(
    run_dir: Path,
    mechanism: str,
    checks: list[CheckFrame],
    materialize: Callable[[Any], Any] = lambda frame: frame,
    digest: Future[str] | None = None,
) -> GateResult:
    """Validate the check frames, write ``gate/result.json`` and the Data Docs; the verdict. ``digest``: the plan's
    digest started before the checks (:func:`start_plan_digest`); without it, the plan's digest now."""
    # Every frame's queries first, then Great Expectations: in a gate process GX is still loading beside them.
    frames = [
        _to_validate(check.frame, materialize, check.materialize_first, check.expectations)
        for check in checks
    ]
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    try:
        from great_expectations.data_context.types.base import ProgressBarsConfig

        context.variables.progress_bars = ProgressBarsConfig(globally=False)
    except Exception:  # cosmetic only
        pass
    spark_source = pandas_source = None
    outcomes: list[Outcome] = []
    validations: list[tuple[str, Any]] = []
    for check, frame in zip(checks, frames, strict=True):
        if _is_spark(frame):
            spark_source = spark_source or context.data_sources.add_spark(name=f"{mechanism}_gate")
            asset = spark_source.add_dataframe_asset(name=check.name)
        else:
            pandas_source = pandas_source or context.data_sources.add_pandas(name=f"{mechanism}_gate_local")
            asset = pandas_source.add_dataframe_asset(name=check.name)
        batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(
            batch_parameters={"dataframe": frame}
        )
        suite = gx.ExpectationSuite(name=f"{mechanism}_{check.name}")
        for expectation in check.expectations:
            suite.add_expectation(expectation.build())
        result = batch.validate(
            suite, result_format={"result_format": "SUMMARY", "partial_unexpected_count": 10}
        )
        if check.rows is not None:
            _of_whole_frame(result, check.rows)
        validations.append((check.name, result))
        for item in result.results:
            config = item.expectation_config
            outcomes.append(
                Outcome(
                    frame=check.name,
                    expectation=config.type,
                    kwargs={k: v for k, v in config.kwargs.items() if k != "batch_id"},
                    success=bool(item.success),
                    rows=int(item.result.get("element_count", 0) or 0),
                    unexpected_count=int(item.result.get("unexpected_count", 0) or 0),
                    unexpected_sample=tuple(item.result.get("partial_unexpected_list", [])[:10]),
                    observed=item.result.get("observed_value"),
                )
            )
    document = GateResult(
        mechanism=mechanism,
        success=all(o.success for o in outcomes),
        plan_digest=digest.result() if digest is not None else plan_digest(run_dir),
        expectations=tuple(outcomes),
    )
    run = RunDir(run_dir)
    write_document(run.gate_result, document)
    try:
        write_data_docs(run.data_docs_dir, mechanism, validations, document.success)
    except Exception as exc:  # the verdict stands without its pages; say so in the log
        print(f"gate: Great Expectations Data Docs not written: {exc!r}")
    return document


# Data Docs pages load Bootstrap, jQuery, Font Awesome and Vega from CDNs and their logo from a web bucket. Here they
# are written to read offline: those tags are dropped, and with them every script (the pages' own scripts call
# jQuery: they would only fail), a small stylesheet of our own is inlined (the validation results are plain HTML
# tables; what the CDN scripts add is sorting and collapsing), the logo is Great Expectations' own image from its
# package, inlined, and the links to a Data Docs site around the pages (there is none) lead to our index.
_EXTERNAL_TAGS = re.compile(
    r"<link\b[^>]*\bhref=\"(?:https?:)?//[^\"]*\"[^>]*>"
    r"|<script\b[^>]*\bsrc=\"(?:https?:)?//[^\"]*\"[^>]*>\s*</script>"
    r"|<link\b[^>]*rel=\"shortcut icon\"[^>]*>",
    re.IGNORECASE,
)
_EXTERNAL_LINKS = re.compile(r"\bhref=\"(?:https?:)?//[^\"]*\"", re.IGNORECASE)
_WEB_IMAGES = re.compile(r"<img\b[^>]*\bsrc=\"(?:https?:)?//[^\"]*\"[^>]*>", re.IGNORECASE)
_SCRIPTS = re.compile(r"<script\b[^>]*>.*?</script>", re.IGNORECASE | re.DOTALL)
_EXTERNAL_CSS_URLS = re.compile(r"url\((['\"]?)(?:https?:)?//[^)'\"]*\1\)", re.IGNORECASE)
_SITE_LINKS = re.compile(r"\bhref=\"(?:\.\./)+[^\"]*\"")
_OFFLINE_CSS = """<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; } th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; }
.card { border: 1px solid #ddd; border-radius: 6px; margin: 0.8em 0; padding: 0.5em 1em; }
.text-danger, .fa-times { color: #c0392b; } .text-success, .fa-check-circle { color: #1e8449; }
.d-none, .modal, .navbar-toggler, form, footer { display: none; }
.sticky > .card:first-child, [data-toggle="collapse"] { display: none; } /* filters and toggles need scripts */
.fas.fa-check-circle::before { content: "\\2714  passed"; } .fas.fa-times::before { content: "\\2718  failed"; }
</style>"""


@functools.cache
def _logo_data() -> str:
    """Great Expectations' logo from its package, as a data URL (the pages name a copy on the web)."""
    import base64

    import great_expectations

    logo = Path(great_expectations.__file__).parent / "render/view/static/images/logo-long.png"
    return "data:image/png;base64," + base64.b64encode(logo.read_bytes()).decode("ascii")


def _web_image(tag: str) -> str:
    """The page's logo from the web, as the packaged logo; any other image from the web, dropped."""
    if "logo" not in tag.lower():
        return ""
    return re.sub(r'\bsrc="[^"]*"', f'src="{_logo_data()}"', tag, count=1)


def offline_html(html: str) -> str:
    """A Data Docs page that needs no network: CDN tags and scripts removed, external links made inert, the logo
    inlined, links to the (absent) site around it led to the index, our CSS inlined."""
    html = _EXTERNAL_TAGS.sub("", html)
    html = _WEB_IMAGES.sub(lambda found: _web_image(found.group(0)), html)
    html = _SCRIPTS.sub("", html)
    html = _EXTERNAL_CSS_URLS.sub(lambda _: f"url('{_logo_data()}')", html)
    html = _EXTERNAL_LINKS.sub('href="#"', html)
    html = _SITE_LINKS.sub('href="index.html"', html)
    return html.replace("</head>", f"{_OFFLINE_CSS}</head>", 1)


@functools.cache
def _data_docs_renderer_and_view() -> tuple[Any, Any]:
    """Great Expectations' page renderer and view, one per process: a view compiles its Jinja templates once, and a
    process that gates many plans (the CLI's sweeps, the tests' session) reuses them."""
    from great_expectations.render.renderer import ValidationResultsPageRenderer
    from great_expectations.render.view import DefaultJinjaPageView

    return ValidationResultsPageRenderer(), DefaultJinjaPageView()


def write_data_docs(out_dir: Path, mechanism: str, validations: list[tuple[str, Any]], success: bool) -> Path:
    """Great Expectations' own validation-result pages (its renderer and page view), one per checked frame, and
    an index; readable offline. Returns index.html."""
    out_dir.mkdir(parents=True, exist_ok=True)
    renderer, view = _data_docs_renderer_and_view()
    rows = []
    for name, result in validations:
        page = f"{name}.html"
        (out_dir / page).write_text(offline_html(view.render(renderer.render(result))), encoding="utf-8")
        rows.append(
            f'<tr><td><a href="{html_escape(page)}">{html_escape(name)}</a></td>'
            f"<td>{'passed' if result.success else 'FAILED'}</td>"
            f"<td>{len(result.results)}</td></tr>"
        )
    index = out_dir / "index.html"
    index.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>Gate: "
        f"{html_escape(mechanism)}</title>{_OFFLINE_CSS}</head><body>"
        f"<h1>Great Expectations gate: {html_escape(mechanism)} ({'passed' if success else 'REJECTED'})</h1>"
        "<table><tr><th>checked frame (suite)</th><th>result</th><th>expectations</th></tr>"
        + "".join(rows)
        + "</table>"
        # From the console (runs/<mechanism>/<run>/files/gate/data_docs/), the run's page.
        "<p><a id='back-to-run' href='../../../'>the run in the housekeeping console</a></p></body></html>",
        encoding="utf-8",
    )
    return index


def raise_if_rejected(document: GateResult, run_dir: Path) -> None:
    if not document.success:
        raise GateRejected(
            f"gate rejected the {document.mechanism} plan in {run_dir}; nothing was applied:\n"
            + document.describe_failures()
        )


def require_passed_gate(run_dir: Path) -> GateResult:
    """Apply's precondition: the gate passed *this* plan, byte for byte."""
    document = read_gate_result(run_dir)
    if document is None:
        raise PlanNotValidated(
            f"plan in {run_dir} was never validated by the gate ({RunDir(run_dir).gate_result} is missing); "
            "refusing to apply"
        )
    if not document.success:
        raise PlanNotValidated(
            f"the gate rejected the plan in {run_dir}; refusing to apply:\n" + document.describe_failures()
        )
    current = plan_digest(run_dir)
    if current != document.plan_digest:
        raise PlanNotValidated(
            f"plan in {run_dir} changed after the gate validated it (digest {current[:12]} != "
            f"{str(document.plan_digest)[:12]}); refusing to apply"
        )
    return document
