"""Before any actor starts: does the pipeline fit the cluster it was submitted to, or the one it can become?

Ray only warns, then waits forever, when an actor asks for more than any node has free, and Ray Data backpressures
its tasks silently when the actors hold every CPU ("3/2 CPU", ``backpressured:tasks(ResourceBudget)``). So the job
compares what every stage reserves with what each node offers, before starting: CPU reservations that do not fit
are scaled down (``ray.fit_to_cluster``) or refused, GPU demand that does not fit is always refused, with one line
naming the stage, what it asks and what the cluster has. It also refuses settings that only work on one machine
when the cluster has (or can have) several. Pure functions over the config, a list of node resources and the node
types an autoscaler may add: the job asks Ray for those (:mod:`jobs.common`), the tests pass them in.

GPUs are packed per device, as Ray schedules them: a GPU is a unit instance, so a share below 1 must fit in what one
GPU has left, and a request above 1 must be a whole number of free GPUs (Ray's resources guide,
doc/source/ray-core/scheduling/resources.rst, "Fractional resource requirements"; ray-project/ray#39293). Eight
actors at 0.9 GPU and an embedder at 0.5 on an 8-GPU node add up to 7.7 GPUs, yet the embedder finds no GPU with
half of it free and waits forever.

An autoscaling cluster is fitted against what it can become: the nodes alive now plus every node its node types can
still add (:class:`NodeType`). Only demand that no such cluster can hold is refused; demand that needs nodes not yet
there is asked of the autoscaler and waited for (:func:`chunker.run.autoscale.fit_cluster`).

The check is necessary, not sufficient: it packs the actors the way that fits best, while Ray places them in the
order they start. A config that fits only one way can still wait on a node taken by a smaller actor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from chunker.config import Config
from chunker.errors import SetupError

TASK_CPUS = 1.0  # the listing and intake tasks: Ray's default, the one the streaming repartition fuses with
MIN_ACTOR_CPUS = 0.05  # below this a scaled reservation means nothing; refuse instead
_EPS = 1e-6

Nodes = list[dict[str, float]]


class ClusterFitError(SetupError):
    """The stages cannot all be placed on this cluster, or a setting cannot work on it; the message says which."""


@dataclass(frozen=True)
class StageDemand:
    stage: str
    count: int  # actors (a task stage: 1, the one slot it needs to make progress)
    cpus: float  # per actor or task
    gpus: float
    actor: bool = True

    def text(self) -> str:
        what = [f"{_num(self.cpus)} CPU"] + ([f"{_num(self.gpus)} GPU"] if self.gpus else [])
        unit = "actor" if self.actor else "task"
        return f"{self.stage} {self.count} {unit}{'s' if self.count != 1 else ''} x ({', '.join(what)})"

    def bundle(self) -> dict[str, float]:
        """One actor's (or task's) resources as Ray and its autoscaler spell them."""
        return {"CPU": self.cpus, **({"GPU": self.gpus} if self.gpus else {})}


@dataclass(frozen=True)
class NodeType:
    """A kind of node an autoscaler can add: its resources and how many of it the cluster may have (-1: no limit)."""

    name: str
    cpus: float
    gpus: float
    max_nodes: int

    def text(self) -> str:
        return f"{self.name} ({_num(self.cpus)} CPU" + (f"/{_num(self.gpus)} GPU" if self.gpus else "") + ")"

    def matches(self, node: dict[str, float]) -> bool:
        return abs(node.get("CPU", 0.0) - self.cpus) < _EPS and abs(node.get("GPU", 0.0) - self.gpus) < _EPS


@dataclass
class Fit:
    cfg: Config  # the config to run with: CPU reservations possibly scaled
    demands: list[StageDemand]
    scale: float = 1.0  # factor applied to every actor's CPU reservation
    note: str = ""  # for the log when something was changed
    waiting: bool = False  # the stages fit only once the autoscaler has added nodes that are not there yet
    asked: bool = False  # the autoscaler was asked for the stages' bundles (withdraw the request at the end)
    notes: list[str] = field(default_factory=list)  # further lines for the run summary (the wait)

    def summary(self) -> str:
        return "; ".join(n for n in [self.note, *self.notes] if n)


def stage_demands(cfg: Config, drivers: int = 1) -> list[StageDemand]:
    """What each stage reserves while the pipeline runs (the read/intake tasks need one slot at least: one per
    driver, when ``drivers`` pipelines run side by side in one job)."""
    r = cfg.ray
    return [
        StageDemand("convert", r.convert_actors, r.convert_cpus(), r.convert_num_gpus),
        StageDemand("plan", r.plan_actors, r.stage_num_cpus, 0.0),
        StageDemand("embed", r.embed_actors, r.stage_num_cpus, r.embed_num_gpus),
        StageDemand("intake", drivers, TASK_CPUS, 0.0, actor=False),
    ]


def bundles(demands: list[StageDemand]) -> list[dict[str, float]]:
    """Every actor's bundle and each task slot: what ``ray.autoscaler.sdk.request_resources`` is asked for."""
    return [d.bundle() for d in demands for _ in range(d.count)]


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}".rstrip("0")


def _cluster_text(nodes: Nodes) -> str:
    cpus = sum(n.get("CPU", 0.0) for n in nodes)
    gpus = sum(n.get("GPU", 0.0) for n in nodes)
    per = ", ".join(f"{_num(n.get('CPU', 0.0))} CPU" + (f"/{_num(n['GPU'])} GPU" if n.get("GPU") else "")
                    for n in nodes)
    return f"{_num(cpus)} CPU and {_num(gpus)} GPU on {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({per})"


def addable(node_types: list[NodeType], nodes: Nodes, unlimited: int) -> Nodes:
    """The nodes the autoscaler can still add: each type up to its maximum, less the alive nodes of its shape
    (``unlimited`` nodes of a type without a maximum: as many as the stages have actors)."""
    left = {t.name: (t.max_nodes if t.max_nodes >= 0 else unlimited) for t in node_types}
    for n in nodes:
        for t in node_types:
            if t.max_nodes >= 0 and left[t.name] > 0 and t.matches(n):
                left[t.name] -= 1
                break
    return [{"CPU": t.cpus, "GPU": t.gpus} for t in node_types for _ in range(max(0, left[t.name]))]


def _growth_text(node_types: list[NodeType] | None, extra: Nodes) -> str:
    if node_types is None:
        return ""
    if not node_types:
        return ", and its autoscaler's node types are unknown"
    if not extra:
        return f", and its autoscaler adds no more nodes (node types: {', '.join(t.text() for t in node_types)})"
    counts = [(t, sum(1 for n in extra if t.matches(n))) for t in node_types]
    return ", and its autoscaler can add " + ", ".join(f"{k} x {t.text()}" for t, k in counts if k)


@dataclass
class _Free:
    cpu: float
    gpus: list[float]  # what each GPU of the node has left (Ray's unit instances)


def _free(nodes: Nodes, held: bool = False) -> list[_Free]:
    """Each node's room; with ``held``, less the GPUs actors of other jobs hold now (``GPU_free``, where known): the
    whole GPUs they hold are taken off first, as Ray hands whole units out first."""
    out = []
    for n in nodes:
        g = n.get("GPU_free", n.get("GPU", 0.0)) if held else n.get("GPU", 0.0)
        whole = int(g + _EPS)
        out.append(_Free(n.get("CPU", 0.0), [1.0] * whole + ([g - whole] if g - whole > _EPS else [])))
    return out


def _take(d: StageDemand, f: _Free) -> list[int] | None:
    """The GPUs of ``f`` one ``d`` would take (none for a CPU actor), or None when it does not fit there."""
    if f.cpu + _EPS < d.cpus:
        return None
    if d.gpus <= _EPS:
        return []
    if d.gpus < 1 - _EPS:  # a share: on one GPU, the one with the least left that still holds it (best fit)
        fits = [i for i, s in enumerate(f.gpus) if s + _EPS >= d.gpus]
        return [min(fits, key=lambda i: f.gpus[i])] if fits else None
    whole = [i for i, s in enumerate(f.gpus) if s >= 1 - _EPS]
    need = round(d.gpus)
    return whole[:need] if len(whole) >= need else None


def _pack(demands: list[StageDemand], nodes: Nodes, held: bool = False) -> StageDemand | None:
    """Place every actor, then each task slot, on the nodes (best fit, biggest first); the first that finds no
    room. ``held``: against what other jobs' actors leave free (see :func:`_free`)."""
    free = _free(nodes, held)
    units = [d for d in demands if d.actor for _ in range(d.count)]
    units.sort(key=lambda d: (d.gpus, d.cpus), reverse=True)
    for d in units + [d for d in demands if not d.actor for _ in range(d.count)]:
        options = [(f, gpus) for f in free if (gpus := _take(d, f)) is not None]
        if not options:
            return d

        def leftover(option: tuple[_Free, list[int]]) -> tuple[float, float, float]:
            f, gpus = option
            share = sum(f.gpus[i] for i in gpus) - d.gpus if gpus else 0.0
            return share, sum(f.gpus) - (d.gpus if gpus else 0.0), f.cpu - d.cpus

        f, gpus = min(options, key=leftover)
        f.cpu -= d.cpus  # a task slot too: each driver's intake needs one of its own
        for i in gpus:
            f.gpus[i] -= min(d.gpus, 1.0)
    return None


def _scaled(demands: list[StageDemand], f: float) -> list[StageDemand]:
    return [StageDemand(d.stage, d.count, math.floor(d.cpus * f * 100) / 100 if d.actor else d.cpus, d.gpus, d.actor)
            for d in demands]


def _check_shares(demands: list[StageDemand]) -> None:
    for d in demands:
        if d.gpus > 1 + _EPS and abs(d.gpus - round(d.gpus)) > _EPS:
            raise ClusterFitError(
                f"ray: the {d.stage} stage asks {_num(d.gpus)} GPU per actor; Ray takes a GPU share below 1 (on one "
                f"GPU) or a whole number of GPUs: set ray.{d.stage}_num_gpus to one of those")


def fits_now(demands: list[StageDemand], nodes: Nodes) -> bool:
    """Whether every stage, as reserved, has room on ``nodes`` beside what other jobs' actors hold there now (what
    the wait for the autoscaler waits for)."""
    return bool(nodes) and _pack(demands, nodes, held=True) is None


def fit_stages(cfg: Config, nodes: Nodes, node_types: list[NodeType] | None = None, drivers: int = 1) -> Fit:
    """The config to run on ``nodes`` (each ``{"CPU": n, "GPU": m}``, alive now, and ``GPU_free``: what other jobs'
    actors leave), or :class:`ClusterFitError`.

    ``node_types``: what an autoscaler can add (None: a fixed cluster; empty: an autoscaler whose node types are
    unknown, fitted against the alive nodes). The stages are fitted against the alive nodes plus every node the types
    can still add; :attr:`Fit.waiting` says when they need nodes (or GPUs other jobs hold) not free yet. ``drivers``
    pipelines of one job run side by side, each with an intake slot of its own."""
    demands = stage_demands(cfg, drivers)
    _check_shares(demands)
    units = sum(d.count for d in demands) + 1
    extra = addable(node_types or [], nodes, units)
    potential = nodes + extra
    have = _cluster_text(nodes) + _growth_text(node_types, extra)
    asked = "; ".join(d.text() for d in demands)
    if not potential:
        raise ClusterFitError("ray: the cluster reports no alive node")
    # GPUs first: they are never scaled. Packed with no CPU demand, so a CPU shortage is reported as one.
    no_cpu = [StageDemand(d.stage, d.count, 0.0, d.gpus, d.actor) for d in demands]
    short = _pack(no_cpu, potential)
    if short is not None:
        gpu_total = sum(d.count * d.gpus for d in demands)
        per_device = " (per GPU: a share below 1 must fit on one GPU)" if any(0 < d.gpus < 1 for d in demands) else ""
        raise ClusterFitError(
            f"ray: the {short.stage} stage cannot be placed: {short.text()} does not fit next to the other stages "
            f"(they ask {_num(gpu_total)} GPU in all{per_device}: {asked}); the cluster has {have}. Lower "
            f"ray.{short.stage}_actors or ray.{short.stage}_num_gpus (embedding can run on CPU: ray.embed_num_gpus=0, "
            f"embed.device=cpu)"
        )
    if _pack(demands, potential) is None:
        return Fit(cfg, demands, waiting=not fits_now(demands, nodes))
    actor_cpus = sum(d.count * d.cpus for d in demands if d.actor)
    total = sum(n.get("CPU", 0.0) for n in potential)
    if not cfg.ray.fit_to_cluster:
        short = _pack(demands, potential)
        raise ClusterFitError(
            f"ray: the {short.stage if short else 'intake'} stage cannot be placed: the stages reserve "
            f"{_num(actor_cpus)} CPU for actors plus {_num(TASK_CPUS)} per intake task ({asked}) and the cluster has "
            f"{have}; lower ray.stage_num_cpus / ray.convert_num_cpus, or set ray.fit_to_cluster=true"
        )
    tasks = sum(d.count * d.cpus for d in demands if not d.actor)
    f = min(1.0, max(0.0, total - tasks) / actor_cpus) if actor_cpus else 1.0
    while f > 0:
        scaled = _scaled(demands, f)
        if all(d.cpus >= MIN_ACTOR_CPUS for d in scaled if d.actor and d.count) and _pack(scaled, potential) is None:
            r = cfg.ray
            stage = max(MIN_ACTOR_CPUS, math.floor(r.stage_num_cpus * f * 100) / 100)
            ray = r.model_copy(update={"stage_num_cpus": stage,
                                       "convert_num_cpus": math.floor(r.convert_cpus() * f * 100) / 100})
            note = (f"ray: the stages reserve {_num(actor_cpus)} CPU for actors plus {_num(TASK_CPUS)} per intake task "
                    f"but the cluster has {have}: actor CPU reservations scaled by {f:.2f} to "
                    f"{'; '.join(d.text() for d in scaled)} (ray.fit_to_cluster)")
            return Fit(cfg.model_copy(update={"ray": ray}), scaled, f, note, waiting=not fits_now(scaled, nodes))
        f = math.floor((f - 0.05) * 100) / 100
    raise ClusterFitError(
        f"ray: the stages cannot be placed even with their CPU reservations scaled down: they ask {asked} and the "
        f"cluster has {have}; use fewer actors (ray.convert_actors, ray.embed_actors) or a bigger cluster"
    )


def potential_nodes(nodes: Nodes, node_types: list[NodeType] | None, cfg: Config, drivers: int = 1) -> int:
    """How many nodes the cluster has or can have (what one-machine settings are judged against). An autoscaler
    whose node types are unknown can add as many as the stages have units: the head alone is not a one-machine
    cluster there, and local paths or Milvus Lite would break once the workers come."""
    units = sum(d.count for d in stage_demands(cfg, drivers)) + 1
    if node_types == []:
        return len(nodes) + units
    return len(nodes) + len(addable(node_types or [], nodes, units))


def multi_node_problems(cfg: Config, output_uri: str, nodes: int, input_uri: str = "") -> list[str]:
    """Settings that only work on one machine, when the cluster has (or can have) several (one line each; empty:
    fine): the checks of :func:`chunker.deploy_checks.cluster_path_problems`, applied to the run's actual output
    URI, and a local ``--input``, which only the machine that reads it has."""
    from chunker.deploy_checks import cluster_path_problems, is_local_path

    run = cfg.model_copy(update={"output": cfg.output.model_copy(update={"dir": output_uri})})
    problems = cluster_path_problems(run, nodes)
    if nodes > 1 and input_uri and is_local_path(input_uri):
        problems.append(
            f"--input {input_uri!r} is a local path, but the cluster has {nodes} nodes and the workers that fetch each "
            f"file run on any of them (the driver's folder is not theirs): put the corpus on object storage "
            f"(s3://bucket/prefix, gs://...) or give file:///path on a filesystem every node mounts at the same place"
        )
    return problems
