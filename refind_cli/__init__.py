"""refind: agent memory over raw chat logs.

The Python API (``refind_cli.api``) is reached from here — ``from refind_cli import Memory`` — but loaded only on
first use: importing the package (as ``refind --help`` does) stays as cheap as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .api import AddOutcome, AgentAnswer, Evidence, Memory, Session
    from .contract import SearchRequest
    from .errors import (
        Conflict,
        DatabaseLocked,
        Forgotten,
        InvalidInput,
        ModelError,
        NotFound,
        RefindError,
        StorageError,
    )
    from .lifecycle import ExpireResult, ForgetResult

_LAZY = {
    "Memory": "api",
    "Evidence": "api",
    "AgentAnswer": "api",
    "Session": "api",
    "AddOutcome": "api",
    "ForgetResult": "lifecycle",
    "ExpireResult": "lifecycle",
    "SearchRequest": "contract",
    "RefindError": "errors",
    "InvalidInput": "errors",
    "Conflict": "errors",
    "NotFound": "errors",
    "Forgotten": "errors",
    "ModelError": "errors",
    "StorageError": "errors",  # the file deleted or replaced under a Memory, no space, read-only, damaged
    "DatabaseLocked": "errors",  # (a StorageError) another writer's lock
}

__all__ = [  # the names of _LAZY (a test keeps the two lists equal)
    "AddOutcome",
    "AgentAnswer",
    "Conflict",
    "DatabaseLocked",
    "Evidence",
    "ExpireResult",
    "ForgetResult",
    "Forgotten",
    "InvalidInput",
    "Memory",
    "ModelError",
    "NotFound",
    "RefindError",
    "SearchRequest",
    "Session",
    "StorageError",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
