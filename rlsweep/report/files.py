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
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

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


# Rows turned into text (CSV) or Arrow arrays (Parquet) at once: the table's files are
# written a piece at a time, so a table of millions of rows never exists as text.
CSV_ROWS = 65_536
# A row group of the Parquet file each (pandas writes up to 1 << 20 rows a group: the
# same frame is read back).
PARQUET_ROWS = 1 << 18


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _csv_cells(values: np.ndarray, dtype: str) -> list[str]:
    """A column's cells as pandas writes them: floats in numpy's shortest round-trip form,
    missing values empty, integers and booleans (True, False) as Python prints them."""
    if dtype == "float64":
        return np.where(np.isnan(values), "", values.astype(str)).tolist()
    if dtype == "int64":
        return values.astype(str).tolist()
    return ["" if _missing(v) else str(v) for v in values.tolist()]


def _write_csv_rows(f: IO[str], table: Table) -> None:
    """The table as CSV into ``f``: a header, then one line per row; a cell with a comma, a
    quote or a line break is quoted."""
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(table.names)
    for lo in range(0, len(table), CSV_ROWS):
        columns = [
            _csv_cells(values[lo : lo + CSV_ROWS], table.dtypes[name])
            for name, values in table.columns.items()
        ]
        writer.writerows(zip(*columns, strict=True))


def csv_text(table: Table) -> str:
    """The table as the CSV text :func:`write_csv` writes."""
    buf = io.StringIO()
    _write_csv_rows(buf, table)
    return buf.getvalue()


def write_csv(path: Path, table: Table) -> None:
    with atomic_open(path, "w") as f:
        _write_csv_rows(f, table)


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


def _validity(missing: np.ndarray) -> pa.Buffer | None:
    """Arrow's validity bitmap of a column (None when no cell is missing)."""
    import pyarrow as pa

    return pa.py_buffer(np.packbits(~missing, bitorder="little")) if missing.any() else None


def _arrow_array(values: np.ndarray, dtype: str) -> pa.Array:
    """One column as an Arrow array built from its buffers: ``pa.array`` would import pandas
    (pyarrow checks every input for a pandas object), which is what this module avoids."""
    import pyarrow as pa

    arrow_type = getattr(pa, _ARROW_TYPES[dtype][0])()
    n = len(values)
    if dtype in ("float64", "int64"):  # numpy columns: their own buffer, NaN a null
        missing = np.isnan(values) if dtype == "float64" else np.zeros(n, dtype=bool)
        data = pa.py_buffer(np.ascontiguousarray(values))
        return pa.Array.from_buffers(arrow_type, n, [_validity(missing), data])
    cells = [None if _missing(v) else v for v in values.tolist()]
    validity = _validity(np.array([c is None for c in cells], dtype=bool))
    if dtype == "Int64":
        data = pa.py_buffer(np.array([0 if c is None else c for c in cells], dtype=np.int64))
        return pa.Array.from_buffers(arrow_type, n, [validity, data])
    if dtype == "boolean":
        bits = np.packbits(np.array([bool(c) for c in cells], dtype=bool), bitorder="little")
        return pa.Array.from_buffers(arrow_type, n, [validity, pa.py_buffer(bits)])
    encoded = [b"" if c is None else str(c).encode() for c in cells]
    offsets = np.zeros(n + 1, dtype=np.int64 if dtype == "str" else np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    return pa.Array.from_buffers(arrow_type, n, buffers)


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

    empty = {name for name in table.names if _empty_object(table, name)}
    metadata = {b"pandas": _pandas_metadata(table, pa.__version__)}
    with atomic_open(path, "wb") as f:
        writer = None
        for lo in range(0, max(len(table), 1), PARQUET_ROWS):  # one row group at a time
            arrays = [
                pa.nulls(len(values[lo : lo + PARQUET_ROWS]))
                if name in empty
                else _arrow_array(values[lo : lo + PARQUET_ROWS], table.dtypes[name])
                for name, values in table.columns.items()
            ]
            part = pa.Table.from_arrays(arrays, names=table.names, metadata=metadata)
            writer = writer or pq.ParquetWriter(f, part.schema)
            writer.write_table(part, row_group_size=PARQUET_ROWS)
        if writer is not None:
            writer.close()
    return True


def write_markdown(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_html(path: Path, text: str) -> None:
    atomic_write_text(path, text)


def write_png(figure: Figure, path: Path) -> None:
    """The figure as a PNG at its own resolution (150 dpi for :mod:`rlsweep.report.plots`)."""
    with atomic_open(path, "wb") as f:
        figure.savefig(f, dpi="figure", format="png")
