"""The OpenAPI documentation of the contract's bodies (for /docs and the fuzz tests).

Documentation only: validation is ``contract.parse_add`` / ``parse_search``, by hand, with precise messages — so an
unknown field is ignored there even though these schemas do not list it.
"""

from __future__ import annotations

from typing import Any

from ..contract import MAX_ID_CHARS

_NONEMPTY = {"type": "string", "pattern": r"\S"}
_ID = {**_NONEMPTY, "maxLength": MAX_ID_CHARS}
ADD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["request_id", "user_id", "session_id", "messages"],
    "properties": {
        "request_id": _ID,
        "user_id": _ID,
        "session_id": _ID,
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "properties": {
                    "role": {"type": "string", "enum": ["user", "assistant", "system"]},
                    "content": {"type": "string", "minLength": 1},  # whitespace alone is a message
                    "timestamp": {
                        "anyOf": [
                            {"type": "integer", "minimum": 100_000_000_000, "exclusiveMaximum": 10_000_000_000_000},
                            {"type": "integer", "minimum": 100_000_000, "exclusiveMaximum": 10_000_000_000},
                            {"type": "null"},
                        ],
                        "description": "Unix milliseconds when the message was said. Unix seconds (1e8 to 1e10, "
                        "1973-2286) are read as seconds (x1000) and a string of digits as the number it spells; "
                        "both are logged as normalized.",
                    },
                },
            },
        },
    },
}
SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["query", "user_id", "top_k"],
    "properties": {
        "query": _NONEMPTY,
        "user_id": _NONEMPTY,
        "top_k": {
            "type": "integer",
            "minimum": 1,
            "description": "Items to return; above 1000 is read as 1000, a string of digits as its number.",
        },
        "options": {"type": "array", "items": {"type": "string"}},
    },
}
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
        }
    },
}
ADD_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["success", "request_id", "user_id", "session_id"],
    "properties": {
        "success": {"type": "boolean"},
        "request_id": {"type": "string"},
        "user_id": {"type": "string"},
        "session_id": {"type": "string"},
    },
}
SEARCH_RESPONSE: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {
        "data": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "content"],
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "content": {"type": "string", "minLength": 1},
                    "score": {"type": "number"},
                    "created_at": {"type": "string"},
                },
            },
        }
    },
}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def operation(body: dict[str, Any], ok: dict[str, Any], *errors: int) -> dict[str, Any]:
    responses = {"200": {"description": "OK", **json_content(ok)}}
    for code in errors:
        responses[str(code)] = {"description": _REASONS[code], **json_content(ERROR_SCHEMA)}
    return {"requestBody": {"required": True, **json_content(body)}, "responses": responses}


_REASONS = {
    401: "Missing or wrong token",
    403: "A foreign Origin or Host (without a token)",
    409: "Same request id, other payload",
    410: "The request id was forgotten (not stored again)",
    413: "Body too large",
    415: "The body is not sent as application/json (checked without a token), or is sent compressed (Content-Encoding)",
    422: "The body breaks the contract",
    502: "The language model failed",
    503: "The database is locked by another process or read-only (nothing was stored; retry)",
    507: "No space left for the database (nothing was stored; retry once space is back)",
}
