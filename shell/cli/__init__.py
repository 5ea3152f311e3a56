"""The ``turnkeep`` command line: ``run``, ``chat``, ``sessions``, ``fake-provider``, ``demo`` and ``chaos``.

Exit codes: 0 success (a completed turn), 1 failure (a failed turn), 2 a usage or configuration error
(one line on stderr), 130 a turn cancelled, or the command interrupted, by Ctrl-C.
"""

from ._entry import main
from ._exit_codes import EXIT_CANCELLED, EXIT_FAILED, EXIT_OK, EXIT_USAGE

__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main"]
