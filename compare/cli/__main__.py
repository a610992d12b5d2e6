"""``python -m compare.cli``: the ``dmk`` command line."""

import sys

from compare.cli import main

sys.exit(main())
