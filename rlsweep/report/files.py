"""The report's files, each written atomically (readers see the old file or the whole new
one): ``report.md``, ``report.html``, ``evaluations.csv``, ``evaluations.parquet`` and the PNGs.

Neither table file imports pandas (its import would be a noticeable part of the end of every
sweep; bench/overhead.py measures that end): ``evaluations.csv`` is exactly what
``DataFrame.to_csv(index=False)`` writes for the same table, and ``evaluations.parquet`` is
written by pyarrow with the schema and pandas metadata that ``DataFrame.to_parquet`` would
give it, so ``pd.read_parquet`` reads back the frame pandas would have written. pyarrow is
the ``parquet`` extra
(``pip install 'rlsweep[parquet]'``): without it only ``evaluations.csv`` is written, and a
warning says so.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import io
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlsweep.report.tidy import Table
from rlsweep.store import atomic_open, atomic_write_text

if TYPE_CHECKING:
    import pyarrow as pa
    from matplotlib.figure import Figure

__all__ = [
    "CURVES_PNG",
    "EVALUATIONS_CSV",
    "EVALUATIONS_PARQUET",
    "IMPROVEMENT_PNG",
    "KEYS_PNG",
    "PROFILES_PNG",
    "REPORT_HTML",
    "REPORT_MD",
    "csv_text",
    "parquet_available",
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
KEYS_PNG = "report_swept_keys.png"

log = logging.getLogger(__name__)


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


# pandas dtype -> (Arrow type name, the "pandas_type" pandas records in the file's metadata).
_ARROW_TYPES = {
    "str": ("large_string", "object"),
    "object": ("string", "unicode"),
    "Int64": ("int64", "int64"),
    "boolean": ("bool_", "bool"),
    "int64": ("int64", "int64"),
    "float64": ("float64", "float64"),
}


def _empty_object(table: Table, name: str) -> bool:
    """An ``object`` column with no value: pandas stores it with Arrow's null type."""
    return table.dtypes[name] == "object" and all(_missing(v) for v in table.columns[name])


def _pandas_type(table: Table, name: str) -> str:
    return "empty" if _empty_object(table, name) else _ARROW_TYPES[table.dtypes[name]][1]


def _pandas_metadata(table: Table, pyarrow_version: str) -> bytes:
    """The ``pandas`` schema metadata ``DataFrame.to_parquet(index=False)`` writes: with it
    ``pd.read_parquet`` restores each column's dtype (``Int64``, ``boolean``, ``str``)."""
    columns = [
        {
            "name": name,
            "field_name": name,
            "pandas_type": _pandas_type(table, name),
            "numpy_type": table.dtypes[name],
            "metadata": None,
        }
        for name in table.names
    ]
    meta = {
        "index_columns": [],
        "column_indexes": [],
        "columns": columns,
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pyarrow_version},
    }
    # Read from the installed package's metadata: importing pandas is what this avoids.
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        meta["pandas_version"] = importlib.metadata.version("pandas")
    return json.dumps(meta).encode()


def _arrow_array(values: Sequence[Any], dtype: str) -> pa.Array:
    """One column as an Arrow array built from its buffers: ``pa.array`` would import pandas
    (pyarrow checks every input for a pandas object), which is what this module avoids."""
    import pyarrow as pa

    cells = [None if _missing(v) else v for v in values]
    missing = np.array([c is None for c in cells], dtype=bool)
    validity = pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None
    arrow_type = getattr(pa, _ARROW_TYPES[dtype][0])()
    if dtype in ("float64", "Int64", "int64"):
        fill, numpy_type = (math.nan, np.float64) if dtype == "float64" else (0, np.int64)
        data = np.array([fill if c is None else c for c in cells], dtype=numpy_type)
        return pa.Array.from_buffers(arrow_type, len(cells), [validity, pa.py_buffer(data)])
    if dtype == "boolean":
        bits = np.packbits(np.array([bool(c) for c in cells], dtype=bool), bitorder="little")
        return pa.Array.from_buffers(arrow_type, len(cells), [validity, pa.py_buffer(bits)])
    encoded = [b"" if c is None else str(c).encode() for c in cells]
    offsets = np.zeros(len(cells) + 1, dtype=np.int64 if dtype == "str" else np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(arrow_type, len(cells), buffers)


def parquet_available() -> bool:
    """Whether pyarrow can be imported: ``evaluations.parquet`` is written only then."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


def write_parquet(path: Path, table: Table) -> bool:
    """The table as Parquet, columns typed as its dtypes say (read back with one
    ``pd.read_parquet`` call); missing values (None, NaN) are Parquet nulls. Without pyarrow
    (the ``parquet`` extra) nothing is written, a file left at ``path`` by an earlier report
    is removed (it would no longer match ``evaluations.csv``) and a warning says so. Returns
    whether the file was written."""
    if not parquet_available():
        path.unlink(missing_ok=True)
        log.warning(
            f"{path.name} not written: pyarrow is not installed "
            "(pip install 'rlsweep[parquet]'); evaluations.csv holds the same table"
        )
        return False
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = [
        pa.nulls(len(values))
        if _empty_object(table, name)
        else _arrow_array(values, table.dtypes[name])
        for name, values in table.columns.items()
    ]
    metadata = {b"pandas": _pandas_metadata(table, pa.__version__)}
    arrow_table = pa.Table.from_arrays(arrays, names=table.names, metadata=metadata)
    with atomic_open(path, "wb") as f:
        pq.write_table(arrow_table, f)
    return True


def write_markdown(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_html(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_png(figure: Figure, path: Path) -> None:
    """The figure as a PNG at its own resolution (150 dpi for :mod:`rlsweep.report.plots`)."""
    with atomic_open(path, "wb") as f:
        figure.savefig(f, dpi="figure", format="png")
