"""Direct ingress: each query replica answers HTTP on a port of its own, so a request skips Serve's proxy.

Why: on the 2-core machines here a request through Serve's HTTP proxy and router to a replica that answers at once
costs ~14-18 ms p50; the same request to the replica's own server ~2 ms (``python -m jobs.benchmark serve-floor``).
That hop was most of the query endpoint's overhead over the store (issue 24).

Ray Serve 2.60 reads ``RAY_SERVE_ENABLE_DIRECT_INGRESS`` (ray/serve/_private/constants.py) in the controller and in
each replica process: the controller then hands each ingress replica a port from the
``RAY_SERVE_DIRECT_INGRESS_{MIN,MAX}_HTTP_PORT`` range and the replica serves the app's routes there, under the
app's route prefix (ray/serve/_private/replica.py, ``_maybe_start_direct_ingress_servers``). The flag is read at
import, so it must be in those processes' environment: the controller gets it through ``serve.start``'s
``controller_options`` (only when this process starts Serve), and the replicas, which the controller creates,
inherit its runtime environment (tests/test_serving.py shows an app deployed without the option answering on a
port of its own). A cluster's own long-lived Serve needs the variable at ``ray start`` on every node instead.
The replicas' addresses come from the controller's ``get_target_groups`` (ray/serve/_private/controller.py), the
list Serve's own HAProxy mode routes by; it is not a public API, so a failure to read it becomes a
:class:`DirectIngressError` that says what failed, not a traceback from inside Ray. With the flag on, Serve runs its
HTTP proxy on the head node only (the controller sets ``HeadOnly``), and that proxy keeps answering on serve.port.
"""

from __future__ import annotations

import time
from typing import Any

from chunker.config import Config
from chunker.errors import SetupError

ENABLE = "RAY_SERVE_ENABLE_DIRECT_INGRESS"


def ingress_env(cfg: Config) -> dict[str, str]:
    """Environment variables that turn direct ingress on in Serve's processes; empty when serve.direct_ingress is off."""
    s = cfg.serve
    if not s.direct_ingress:
        return {}
    lo, hi = s.direct_ingress_ports
    return {ENABLE: "1", "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(lo),
            "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(hi)}


def controller_options(cfg: Config) -> dict[str, Any] | None:
    """``serve.start(controller_options=...)`` for this config (None when direct ingress is off)."""
    env = ingress_env(cfg)
    return {"runtime_env": {"env_vars": env}} if env else None


def replica_urls(app_name: str, host: str | None = None, wait_s: float = 30.0) -> list[str]:
    """Base URLs (``http://host:port/prefix``) of ``app_name``'s replicas' own HTTP servers.

    ``host`` replaces the node address Serve reports (the replicas bind ``http_options.host``: a loopback-only
    Serve is not reachable at the node's address). A replica that is up but not yet given its port is listed
    without one for a moment, so this waits up to ``wait_s``; then :class:`DirectIngressError` says why there is
    none (a caller that asked for direct ingress is told, instead of silently measuring the proxy).
    """
    import ray
    from ray.serve.context import _get_global_client

    controller = _get_global_client()._controller
    proxy_ports = _proxy_ports(ray, controller)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            groups = ray.get(controller.get_target_groups.remote(app_name), timeout=30)
        except Exception as exc:  # noqa: BLE001 - a private API: say what failed instead of a deep traceback
            raise DirectIngressError(f"could not read the replicas' ports from Serve's controller: {exc}") from exc
        urls, proxied = [], False
        for g in groups:
            if getattr(g.protocol, "value", str(g.protocol)).upper() != "HTTP":
                continue
            if not g.app_name:  # Serve's proxies, listed for every app when the controller runs without the flag
                proxied = True
                continue
            if g.app_name != app_name:
                continue
            prefix = "" if g.route_prefix == "/" else g.route_prefix.rstrip("/")
            for t in g.targets:
                if t.port in proxy_ports:
                    proxied = True
                else:
                    urls.append(f"http://{host or t.ip}:{t.port}{prefix}")
        if urls:
            return urls
        if time.monotonic() >= deadline:
            if proxied:
                raise DirectIngressError(
                    f"Serve routes app {app_name!r} through its proxy: its controller runs without {ENABLE}=1. "
                    "Start Serve from a process with serve.direct_ingress on, or set the variable at `ray start` "
                    "on every node.")
            raise DirectIngressError(
                f"no replica of app {app_name!r} has a port of its own after {wait_s:g} s: it was built without "
                "the direct-ingress variables in its replicas' environment, or none is running.")
        time.sleep(0.5)


def _proxy_ports(ray: Any, controller: Any) -> set[int]:
    try:
        http = ray.get(controller.get_http_config.remote(), timeout=30)
        return {int(http.port)}
    except Exception:  # noqa: BLE001 - only used to tell proxy targets from replica targets
        return set()


class DirectIngressError(SetupError):
    """Direct ingress was asked for but Serve does not provide it."""
