"""A small FastAPI app for the HTTP span tests: one parametrised route, one failing route,
and its route templates."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from httpkit.spans import RouteTemplates, server_traceparent

__all__ = ["fail", "get_item", "items", "small_app"]

items = APIRouter(prefix="/api")


@items.get("/items/{item_id}")
async def get_item(item_id: str) -> dict[str, str]:
    """The item, and the traceparent its handler would send on."""
    return {"item": item_id, "traceparent": server_traceparent()}


@items.post("/fail")
async def fail() -> None:
    """Always a server error."""
    raise RuntimeError("boom")


def small_app() -> tuple[FastAPI, RouteTemplates]:
    """An app with one parametrised route, one failing route, and its route templates."""
    app = FastAPI()
    app.include_router(items)
    return app, RouteTemplates([*app.router.routes, *items.routes])
