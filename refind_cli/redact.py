"""Secrets out of error text and traces: what looks like an API key, and the keys this process was given.

A provider's error message is passed on to the user (a 502 body, a red CLI line) and stored in the search's trace;
some providers echo the request, key included. Everything that leaves ``model.py`` as text goes through
:func:`redact` first.
"""

from __future__ import annotations

import functools
import os
import re

from .settings import ENV_API_KEY

MARK = "[redacted]"
MIN_SECRET_CHARS = 8  # a key refind sends shorter than this (a placeholder) is not worth hiding, and too common
# Any other variable's value is hidden from 16 characters. It is replaced wherever it appears, and a trace quotes the
# chat, where a word a person chose as a token ("development", "something") is common: a value of 8-15 characters
# blanked up to 32% of the shared sets' messages, one of 16 or more at most 0.43% (bench/redaction_collisions.py).
# A provider's key (32 or more) and a generated token are longer; a shorter value of these variables is never sent
# to a provider, so no reply or error can echo it.
MIN_OTHER_SECRET_CHARS = 16
# Shapes of provider keys and bearer credentials: OpenAI/Anthropic style "sk-…", Stripe "sk_live_…" (and its
# webhook "whsec_…"), Google "AIza…", GitHub, Slack, AWS access key ids, HuggingFace, and whatever follows "Bearer "
# or an api_key=/"api_key": assignment.
_SHAPES = re.compile(
    r"""(?x)
    \b(?:sk|rk|pk)-[A-Za-z0-9_\-]{16,}
  | \b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}
  | \bwhsec_[A-Za-z0-9]{16,}
  | \bAIza[0-9A-Za-z_\-]{30,}
  | \bgh[pousr]_[A-Za-z0-9]{20,}
  | \bxox[abposr]-[A-Za-z0-9\-]{10,}
  | \bAKIA[0-9A-Z]{16}\b
  | \bhf_[A-Za-z0-9]{20,}
  | (?i:bearer)\s+[A-Za-z0-9._~+/=\-]{12,}
  | (?i:api[_-]?key)["']?\s*[:=]\s*["']?[A-Za-z0-9._~+/=\-]{8,}
    """
)


def configured_secrets() -> list[str]:
    """Values of the environment's key variables (``*_KEY``, ``*_TOKEN``, ``*SECRET*``), longest first: REFIND_API_KEY
    (the key refind sends to --api-base, which a server may echo) from MIN_SECRET_CHARS, any other from
    MIN_OTHER_SECRET_CHARS."""
    found = {
        value.strip()
        for name, value in os.environ.items()
        if name.endswith(("_KEY", "_TOKEN")) or "SECRET" in name
        if len(value.strip()) >= (MIN_SECRET_CHARS if name == ENV_API_KEY else MIN_OTHER_SECRET_CHARS)
    }
    return sorted(found, key=len, reverse=True)


def redact(text: str, *extra: str | None) -> str:
    """``text`` with every configured secret (and ``extra``) and every key-shaped string replaced by MARK — a secret
    also where JSON text escapes its characters (a model's reply, a tool call's arguments: ``\\/``, ``\\u0061``),
    which reads back as the secret itself."""
    secrets = [*(e for e in extra if e and len(e) >= MIN_SECRET_CHARS), *configured_secrets()]
    for secret in secrets:
        text = text.replace(secret, MARK)
    if "\\" in text:
        for secret in secrets:
            text = _json_escaped(secret).sub(MARK, text)
    return _SHAPES.sub(MARK, text)


@functools.lru_cache(maxsize=64)
def _json_escaped(secret: str) -> re.Pattern[str]:
    """``secret`` as JSON text may write it, escaped once or again (JSON quoted inside JSON): each character as
    itself or as ``\\uXXXX`` (hex in either case), a "/" also as ``\\/``, a '"' as ``\\"`` and a backslash as ``\\\\``."""
    parts = []
    for c in secret:
        alts = [re.escape(c)]
        if ord(c) < 0x10000:
            alts.append(r"\\+u" + "".join(f"[{h}{h.upper()}]" if h.isalpha() else h for h in f"{ord(c):04x}"))
        if c == "/":
            alts.append(r"\\+/")
        elif c == '"':  # (JSON always escapes these two: a key holding one was never redacted where it was echoed)
            alts.append(r'\\+"')
        elif c == "\\":
            alts.append(r"\\{2,}")
        parts.append(f"(?:{'|'.join(alts)})")
    return re.compile("".join(parts))


def redact_data(data: object) -> object:
    """Every string inside JSON-like data (dicts, lists) redacted; keys and other values kept."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, dict):
        return {k: redact_data(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [redact_data(v) for v in data]
    return data
