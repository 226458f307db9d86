"""``create_app`` is a factory (ARCHITECTURE.md, "Layout": api/ is an app factory plus one router module
per domain): every route of the app is a module-level function of its router module, reaching the
runtime and the caller through ``Depends``, never a closure over them; and the factory stays small."""

from __future__ import annotations

import inspect

from fastapi.routing import APIRoute, iter_route_contexts

from agentvm.api import app as app_module
from agentvm.api.app import create_app


def test_every_route_is_a_module_level_function_of_an_api_module(harness):
    app = create_app(harness.rt)
    endpoints = [
        ctx.endpoint for ctx in iter_route_contexts(app.routes) if isinstance(ctx.original_route, APIRoute)
    ]
    assert len(endpoints) > 50
    for endpoint in endpoints:
        assert "<locals>" not in endpoint.__qualname__, endpoint.__qualname__
        assert endpoint.__module__.startswith("agentvm.api."), endpoint.__module__


def test_create_app_stays_a_small_factory():
    lines = inspect.getsource(app_module.create_app).splitlines()
    assert len(lines) <= 60, len(lines)
