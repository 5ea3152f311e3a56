"""``python -m shell.cli``: the same as the ``turnkeep`` command."""

import sys

from ._entry import main

sys.exit(main())
