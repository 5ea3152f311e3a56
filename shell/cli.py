"""The ``turnkeep`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnkeep", description="Supervised actors for LLM agent sessions.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the live demo (no API key, no network)")
    demo.add_argument("--operations", type=int, default=400)
    demo.add_argument("--crash-probability", type=float, default=0.02)
    demo.add_argument("--seed", type=int, default=7)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 success, 1 failure, 2 usage error)."""
    args = _build_parser().parse_args(argv)
    if args.command == "demo":
        from ._supervision_demo import run

        return run(args.operations, args.crash_probability, args.seed)
    return 2  # pragma: no cover - argparse refuses unknown commands


if __name__ == "__main__":
    sys.exit(main())
