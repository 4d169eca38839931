"""The report's files, each written atomically (readers see the old file or the whole new
one): ``report.md``, ``report.html``, ``evaluations.csv``, ``evaluations.parquet`` and the PNGs.

``evaluations.csv`` is written without pandas, exactly as ``DataFrame.to_csv(index=False)``
writes the same table; pandas is imported only to write ``evaluations.parquet``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsweep.report.tidy import Table
from rlsweep.store import atomic_open, atomic_write_text

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CURVES_PNG",
    "EVALUATIONS_CSV",
    "EVALUATIONS_PARQUET",
    "IMPROVEMENT_PNG",
    "PROFILES_PNG",
    "REPORT_HTML",
    "REPORT_MD",
    "csv_text",
    "write_csv",
    "write_html",
    "write_markdown",
    "write_parquet",
    "write_png",
]

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
EVALUATIONS_CSV = "evaluations.csv"
EVALUATIONS_PARQUET = "evaluations.parquet"
CURVES_PNG = "report_learning_curves.png"
PROFILES_PNG = "report_performance_profiles.png"
IMPROVEMENT_PNG = "report_probability_of_improvement.png"
SEARCH_PNG = "report_search_progress.png"


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _csv_cells(values: Sequence[Any], dtype: str) -> list[str]:
    """A column's cells as pandas writes them: floats in numpy's shortest round-trip form,
    missing values empty, integers and booleans (True, False) as Python prints them."""
    if dtype == "float64":
        array = np.array([math.nan if v is None else v for v in values], dtype=np.float64)
        return [
            "" if math.isnan(x) else text for x, text in zip(array, array.astype(str), strict=True)
        ]
    return ["" if _missing(v) else str(v) for v in values]


def csv_text(table: Table) -> str:
    """The table as CSV text: a header, then one line per row; a cell with a comma, a quote
    or a line break is quoted."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(table.names)
    columns = [_csv_cells(values, table.dtypes[name]) for name, values in table.columns.items()]
    writer.writerows(zip(*columns, strict=True))
    return buf.getvalue()


def write_csv(path: Path, table: Table) -> None:
    atomic_write_text(path, csv_text(table))


def write_parquet(path: Path, table: Table) -> None:
    """The table as Parquet, columns typed as its dtypes say (read back with one
    ``pd.read_parquet`` call)."""
    import pandas as pd

    frame = pd.DataFrame(table.columns, columns=table.names).astype(table.dtypes)
    with atomic_open(path, "wb") as f:
        frame.to_parquet(f, index=False)


def write_markdown(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_html(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_png(figure: Figure, path: Path) -> None:
    """The figure as a PNG at its own resolution (150 dpi for :mod:`rlsweep.report.plots`)."""
    with atomic_open(path, "wb") as f:
        figure.savefig(f, dpi="figure", format="png")
