"""Concurrent first calls of a route. Powertools builds a route's middleware chain on its first call with an
unlocked check-then-build; `memlane serve` resolves requests on several threads over one resolver, so two
first calls both built it, the second wrapping the first's chain, and the route answered 500 (`TypeError:
MiddlewareFrame.__call__() got an unexpected keyword argument`) until the process restarted. The chains are
now built when the app is (`RequestScopedResolver.build_routes`)."""

from __future__ import annotations

import sys
import threading

from memlane.api.app import Api
from memlane.server import _LambdaContext, http_event
from memlane.services import stores

CALLERS = 8


def _status(api: Api, tenant: str = "t0") -> int | str:
    path = f"/v1/stores/demo/memories?app_id=a&tenant_id={tenant}"  # each caller its own tenant
    try:
        return api.resolve(http_event("GET", path, {"content-type": "application/json"}, b"", "127.0.0.1"),
                           _LambdaContext())["statusCode"]
    except Exception as error:  # noqa: BLE001  (memlane serve answers 500 for it)
        return repr(error)


def test_first_calls_of_a_route_at_once_leave_it_working(service, deps) -> None:
    stores.create(deps, name="demo")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the window is a few bytecodes wide: switch threads as often as possible
    try:
        for _ in range(10):
            api = Api(deps)  # a fresh process's app: no route called yet
            go = threading.Barrier(CALLERS)
            statuses: list[int | str] = []

            def first_call(tenant: str) -> None:
                go.wait()
                statuses.append(_status(api, tenant))

            callers = [threading.Thread(target=first_call, args=(f"t{n}",)) for n in range(CALLERS)]
            for t in callers:
                t.start()
            for t in callers:
                t.join(60)
            assert statuses == [200] * CALLERS and [_status(api) for _ in range(3)] == [200] * 3, statuses
    finally:
        sys.setswitchinterval(interval)


def test_every_route_is_built_with_the_app(deps) -> None:
    api = Api(deps)
    routes = [*api.app._static_routes, *api.app._dynamic_routes]
    assert len(routes) > 20 and all(r._middleware_stack_built for r in routes)
