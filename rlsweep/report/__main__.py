"""``python -m rlsweep.report``: see :mod:`rlsweep.report.cli`."""

from rlsweep.report.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
