"""`refind serve`: the FastAPI app factory and routes (app.py), the ASGI middleware for body limits and the access
log (asgi.py), who may talk to it at all — the token, Host/Origin/JSON rules — (guard.py), read deadlines and the
connection cap (connections.py), the store pool and group-commit writer (dbpool.py) and the OpenAPI schema
(api_schema.py).
Importing this package imports FastAPI; the CLI does so only on the serve path."""

from .app import ServerSettings, app_from_env, create_app

__all__ = ["ServerSettings", "app_from_env", "create_app"]
