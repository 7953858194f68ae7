"""Waiting for the nodes a run needs: what to ask an autoscaler for, how long to wait, and when to stop waiting.

Pure functions over the config and node lists like :mod:`chunker.run.cluster`; the job passes in how to read the
nodes and how to ask (:mod:`jobs.claim` keeps the request alive while the job waits and withdraws it on every way
out).

Three kinds of cluster:

* fixed (``node_types`` None): nothing to ask; GPUs that other jobs' actors hold now are noted (this job's actors wait
  for them), CPU reservations are scaled to fit (``ray.fit_to_cluster``);
* an autoscaler whose node types are known (read from the cluster, or ``ray.node_types``): demand no node type can
  hold is refused at once; the stages' bundles, scaled to the cluster it can become, are asked for, and the wait ends
  when the alive nodes hold them;
* an autoscaler whose node types are unknown (KubeRay without ``ray.node_types``): only what no scaling can make fit
  is asked for, the GPU actors' bundles. A CPU-only bundle may bring a GPU pod when the only group it can see has
  GPUs (Ray's autoscaler merely prefers non-GPU types for CPU-only demand: resource_demand_scheduler.py,
  ``AUTOSCALER_CONSERVE_GPU_NODES``), so CPU reservations are scaled onto the nodes that come instead, and the wait
  ends as soon as the scaled stages fit them; it is refused when they do not by the end of the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from chunker.config import Config
from chunker.run.cluster import (ClusterFitError, Fit, NodeType, Nodes, _cluster_text, _num, bundles, fit_stages,
                                 fits_now, stage_demands)

POLL_S = 2.0  # how often the wait for the autoscaler looks at the nodes


def _held_note(nodes: Nodes) -> str:
    held = sum(n.get("GPU", 0.0) - n.get("GPU_free", n.get("GPU", 0.0)) for n in nodes)
    return (f"ray: {_num(held)} of the cluster's GPUs are held by other jobs' actors now; this run's actors that do "
            f"not fit beside them wait until they are free")


def fit_cluster(cfg: Config, nodes: Nodes, node_types: list[NodeType] | None, *,
                get_nodes: Callable[[], Nodes], request: Callable[[list[dict[str, float]]], None],
                say: Callable[[str], None], timeout_s: float, sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic, poll_s: float = POLL_S, drivers: int = 1) -> Fit:
    """:func:`chunker.run.cluster.fit_stages`, and on an autoscaling cluster whose alive nodes cannot hold the
    stages yet: ask the autoscaler (``request``, once: keeping it asked is the caller's), wait at most ``timeout_s``
    with one line said, then fit again against the nodes there are (see the module's docstring).

    Refused at once: demand that no cluster the node types allow can hold. Refused after the wait: demand the alive
    nodes still cannot hold when the node types are unknown. Started anyway after the wait: demand the node types
    can hold, its actors waiting for the nodes the autoscaler keeps adding (:attr:`Fit.waiting`)."""
    if node_types == []:
        return _fit_unknown(cfg, nodes, get_nodes=get_nodes, request=request, say=say, timeout_s=timeout_s,
                            sleep=sleep, clock=clock, poll_s=poll_s, drivers=drivers)
    fit = fit_stages(cfg, nodes, node_types, drivers)
    if not fit.waiting:
        return fit
    if node_types is None:  # fixed: what does not fit now is held by other jobs' actors
        fit.notes.append(_held_note(nodes))
        return fit
    asked = bundles(fit.demands)
    request(asked)
    _say_asked(say, asked, timeout_s)
    nodes, waited = _wait(lambda n: fits_now(fit.demands, n), nodes, get_nodes, timeout_s, sleep, clock, poll_s)
    try:
        out = fit_stages(cfg, nodes, node_types, drivers)
    except ClusterFitError as exc:
        request([])
        raise ClusterFitError(
            f"{exc} (after waiting {waited:.0f} s for the autoscaler: ray.autoscale_wait_s)") from None
    out.asked = True
    if out.waiting:
        out.notes.append(f"ray: after {waited:.0f} s the autoscaler has not added every node the stages need "
                         f"({_cluster_text(nodes)} so far); the actors that do not fit yet wait for their nodes")
    else:
        out.notes.append(_arrived(waited, nodes))
    return out


def _fit_unknown(cfg: Config, nodes: Nodes, *, get_nodes: Callable[[], Nodes],
                 request: Callable[[list[dict[str, float]]], None], say: Callable[[str], None], timeout_s: float,
                 sleep: Callable[[float], None], clock: Callable[[], float], poll_s: float, drivers: int) -> Fit:
    """The node types are unknown: ask for the GPU actors' bundles only (all bundles when there is no GPU demand
    and the CPU stages cannot be placed even scaled), and stop waiting once the stages, CPU scaled as
    ``ray.fit_to_cluster`` allows, fit the nodes alive."""

    def ready(n: Nodes) -> Fit | None:
        try:
            fit = fit_stages(cfg, n, [], drivers)
        except ClusterFitError:
            return None
        return None if fit.waiting else fit

    fit = ready(nodes)
    if fit is not None:
        return fit
    demands = stage_demands(cfg, drivers)
    asked = [b for b in bundles(demands) if b.get("GPU")] or bundles(demands)
    request(asked)
    _say_asked(say, asked, timeout_s)
    nodes, waited = _wait(lambda n: ready(n) is not None, nodes, get_nodes, timeout_s, sleep, clock, poll_s)
    out = ready(nodes)
    if out is None:
        request([])
        try:
            fit_stages(cfg, nodes, [], drivers)
            reason = _held_note(nodes)  # placeable on the nodes, but other jobs' actors hold the GPUs
        except ClusterFitError as exc:
            reason = str(exc)
        raise ClusterFitError(f"{reason} (after waiting {waited:.0f} s for the autoscaler: ray.autoscale_wait_s)")
    out.asked = True
    out.notes.append(_arrived(waited, nodes))
    return out


def _say_asked(say: Callable[[str], None], asked: list[dict[str, float]], timeout_s: float) -> None:
    say(f"ray: the stages need nodes the cluster does not have yet; asked its autoscaler for {len(asked)} bundles "
        f"({_num(sum(b['CPU'] for b in asked))} CPU, {_num(sum(b.get('GPU', 0.0) for b in asked))} GPU) and waiting "
        f"up to {timeout_s:.0f} s for them (ray.autoscale_wait_s)")


def _arrived(waited: float, nodes: Nodes) -> str:
    return f"ray: the autoscaler added the nodes the stages need in {waited:.0f} s (now {_cluster_text(nodes)})"


def _wait(done: Callable[[Nodes], bool], nodes: Nodes, get_nodes: Callable[[], Nodes], timeout_s: float,
          sleep: Callable[[float], None], clock: Callable[[], float], poll_s: float) -> tuple[Nodes, float]:
    t0 = clock()
    while not done(nodes) and clock() - t0 < timeout_s:
        sleep(poll_s)
        nodes = get_nodes()
    return nodes, clock() - t0
