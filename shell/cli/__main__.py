"""``python -m shell.cli``: the same as the ``turnkeep`` command."""

import sys

from ._main import main

sys.exit(main())
