"""Optional features and the pip extras that install what they need."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

__all__ = ["Extra", "MissingExtra", "needs_extra"]

Extra = Literal["serve", "telemetry", "mcp", "postgres", "ray"]
"""The extras of the package: ``pip install 'turnkeep[NAME]'`` (``all`` installs every one)."""


class MissingExtra(ImportError):
    """A feature was used whose optional dependencies are not installed.

    The message names the missing package and the command that installs it; ``extra`` is the extra's
    name and ``name`` (as on any ImportError) the module that could not be imported.
    """

    def __init__(self, feature: str, extra: Extra, missing: str | None) -> None:
        missing = missing.partition(".")[0] if missing else None
        package = f"the `{missing}` package" if missing else "optional packages"
        super().__init__(f"{feature} needs {package}: pip install 'turnkeep[{extra}]'", name=missing)
        self.feature = feature
        self.extra: Extra = extra


@contextmanager
def needs_extra(feature: str, extra: Extra) -> Iterator[None]:
    """Within: an ImportError of a missing module becomes :class:`MissingExtra` naming ``extra``."""
    try:
        yield
    except ModuleNotFoundError as error:
        raise MissingExtra(feature, extra, error.name) from error
    except ImportError as error:  # a module set to None in sys.modules, or a broken install
        if isinstance(error, MissingExtra):
            raise
        raise MissingExtra(feature, extra, error.name) from error
