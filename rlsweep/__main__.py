"""``python -m rlsweep``: see rlsweep.app."""

from rlsweep.app import main

if __name__ == "__main__":
    main()
