"""``python -m compare.cli``: the ``dmk`` command line."""

import sys

from compare.cli import main

if __name__ == "__main__":  # imported (a doctest or module sweep), it runs nothing
    sys.exit(main())
