"""The report's files: evaluations.csv and evaluations.parquet, written without pandas, are
what pandas writes (the same text; the same Arrow schema and pandas metadata, read back as the
same typed frame), every file is written atomically; the end of a sweep imports matplotlib
only when it draws and pandas never; and without pyarrow (the ``parquet`` extra) only the CSV
is written, with a warning."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rlsweep.report.files import csv_text, parquet_available, write_csv, write_parquet
from rlsweep.report.tidy import Table

if TYPE_CHECKING:  # pandas is imported by the tests that read with it, not at collection
    import pandas as pd

TABLE = Table.of(
    columns={
        "text": ["a", "b,c", 'say "hi"', "line\nbreak", None, "é"],
        "object": [None, "x", "1.5", "true", "[1,2]", "z"],
        "ints": [1, None, 3, -4, 0, 2**40],
        "bools": [True, False, None, True, False, True],
        "step": [0, 10, 20, 30, 40, 2**33],
        "float": [0.1, math.nan, 1e-7, 123456789.123, -0.0, 1e16],
        "whole": [1.0, 2.5, 1 / 3, 100.0, -2.0, math.inf],
    },
    dtypes={
        "text": "str",
        "object": "object",
        "ints": "Int64",
        "bools": "boolean",
        "step": "int64",
        "float": "float64",
        "whole": "float64",
    },
)


def frame(table: Table) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(table.columns, columns=table.names).astype(table.dtypes)


@pytest.mark.parametrize("rows", [6, 1, 0])
def test_csv_is_what_pandas_writes(rows: int) -> None:
    table = Table.of({k: v[:rows] for k, v in TABLE.columns.items()}, TABLE.dtypes)
    assert csv_text(table) == frame(table).to_csv(index=False)


@pytest.mark.parametrize("rows", [6, 1, 0])
def test_parquet_is_what_pandas_writes(tmp_path: Path, rows: int) -> None:
    import pandas as pd
    import pyarrow.parquet as pq

    table = Table.of({k: v[:rows] for k, v in TABLE.columns.items()}, TABLE.dtypes)
    write_parquet(tmp_path / "ours.parquet", table)
    frame(table).to_parquet(tmp_path / "pandas.parquet", index=False)
    ours, theirs = (pq.read_schema(tmp_path / f) for f in ("ours.parquet", "pandas.parquet"))
    assert ours.equals(theirs, check_metadata=True)  # types, and the pandas dtypes recorded
    read = pd.read_parquet(tmp_path / "ours.parquet")
    pd.testing.assert_frame_equal(read, pd.read_parquet(tmp_path / "pandas.parquet"))
    # One row: the object column is all missing (Arrow's null type, as pandas stores it).
    assert str(read["object"].dtype) == ("str" if rows == 6 else "object")


def test_files_read_back_and_leave_no_temporary_file(tmp_path: Path) -> None:
    import pandas as pd

    write_csv(tmp_path / "t.csv", TABLE)
    write_parquet(tmp_path / "t.parquet", TABLE)
    expected, read = frame(TABLE), pd.read_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(read, expected, check_dtype=False)  # text may come back as str
    typed = ("ints", "bools", "step", "float", "whole")
    assert [str(read[c].dtype) for c in typed] == [TABLE.dtypes[c] for c in typed]
    from_csv = pd.read_csv(tmp_path / "t.csv")
    assert list(from_csv.columns) == TABLE.names
    assert list(from_csv["text"].fillna("")) == [v or "" for v in TABLE.columns["text"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.parquet"]


def test_the_end_of_a_sweep_imports_neither_pandas_nor_matplotlib(tmp_path: Path) -> None:
    code = (
        "import sys; import rlsweep.summary, rlsweep.report.build, rlsweep.report.cli; "
        "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules)); "
        "from pathlib import Path; from rlsweep.report.files import write_csv, write_parquet; "
        "from rlsweep.report.tidy import Table; t = Table.of({'a': [1, None]}, {'a': 'Int64'}); "
        f"write_csv(Path({str(tmp_path)!r}) / 'e.csv', t); "
        f"write_parquet(Path({str(tmp_path)!r}) / 'e.parquet', t); "
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["[]", "False"]


def test_without_pyarrow_only_the_csv_is_written_and_a_warning_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    stale = tmp_path / "evaluations.parquet"
    write_parquet(stale, TABLE)  # an earlier report's, written while pyarrow was there
    assert parquet_available() and stale.is_file()
    for name in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, name, None)  # `import pyarrow` raises ImportError
    assert not parquet_available()
    write_csv(tmp_path / "evaluations.csv", TABLE)
    with caplog.at_level(logging.WARNING, logger="rlsweep.report.files"):
        assert write_parquet(stale, TABLE) is False
    # The stale file is gone: it would not match the CSV written beside it.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evaluations.csv"]
    (record,) = caplog.records
    assert "evaluations.parquet not written: pyarrow is not installed" in record.getMessage()
    assert "pip install 'rlsweep[parquet]'" in record.getMessage()


def _long(rows: int) -> Table:
    """TABLE's rows repeated to ``rows`` rows."""
    reps = -(-rows // 6)
    return Table.of({k: (list(v) * reps)[:rows] for k, v in TABLE.columns.items()}, TABLE.dtypes)


def _csv_peak(path: Path, table: Table) -> int:
    """The peak of Python's allocations while ``table`` is written to ``path``."""
    import tracemalloc

    tracemalloc.start()
    try:
        write_csv(path, table)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_table_of_many_pieces_is_written_as_pandas_writes_it_in_bounded_memory(
    tmp_path: Path,
) -> None:
    """A table longer than the pieces the files are written in (CSV_ROWS, PARQUET_ROWS):
    the same CSV text and Parquet frame as pandas'; and writing the CSV of twice the rows
    takes no more memory (a piece at a time, never the whole text)."""
    import pandas as pd

    from rlsweep.report.files import CSV_ROWS, PARQUET_ROWS

    table = _long(PARQUET_ROWS + CSV_ROWS + 7)
    expected = frame(table)
    write_csv(tmp_path / "t.csv", table)
    assert (tmp_path / "t.csv").read_text(encoding="utf-8") == expected.to_csv(index=False)
    write_parquet(tmp_path / "t.parquet", table)
    expected.to_parquet(tmp_path / "pandas.parquet", index=False)
    pd.testing.assert_frame_equal(
        pd.read_parquet(tmp_path / "t.parquet"), pd.read_parquet(tmp_path / "pandas.parquet")
    )
    once = _csv_peak(tmp_path / "once.csv", _long(2 * CSV_ROWS))
    twice = _csv_peak(tmp_path / "twice.csv", _long(4 * CSV_ROWS))
    assert twice < 1.2 * once, (once, twice)
