"""``turnkeep acp``: an Agent Client Protocol (v1) agent over stdio, with a host in the same process.

Editors (Zed, JetBrains IDEs, Neovim and Emacs plugins) start it as a child process and speak
newline-delimited JSON-RPC 2.0 on its stdin and stdout; every ``session/prompt`` gets exactly one answer
with one stop reason (see :mod:`._outcome` and docs/acp.md).
"""

from ._agent import AcpAgent
from ._jsonrpc import LineSplitter, Oversized, RpcError, parse_message
from ._ledger import Answer, PromptLedger
from ._outcome import Failure, Stop, outcome_of
from ._schema import PROTOCOL_VERSION
from ._settings import AcpSettings
from ._stdio import StdioClaim, claim_stdio, serve_stdio
from ._updates import UpdateBuilder

__all__ = [
    "PROTOCOL_VERSION",
    "AcpAgent",
    "AcpSettings",
    "Answer",
    "Failure",
    "LineSplitter",
    "Oversized",
    "PromptLedger",
    "RpcError",
    "StdioClaim",
    "Stop",
    "UpdateBuilder",
    "claim_stdio",
    "outcome_of",
    "parse_message",
    "serve_stdio",
]
