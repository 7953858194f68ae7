"""Before any actor starts: does the pipeline fit the cluster it was submitted to?

Ray only warns, then waits forever, when an actor asks for more than any node has free, and Ray Data backpressures
its tasks silently when the actors hold every CPU ("3/2 CPU", ``backpressured:tasks(ResourceBudget)``). So the job
compares what every stage reserves with what each node offers, before starting: CPU reservations that do not fit
are scaled down (``ray.fit_to_cluster``) or refused, GPU demand that does not fit is always refused, with one line
naming the stage, what it asks and what the cluster has. It also refuses settings that only work on one machine
when the cluster has several. Pure functions over the config and a list of node resources: the job asks Ray for
those (``ray.nodes()``), the tests pass them in.

The check is necessary, not sufficient: it packs the actors the way that fits best, while Ray places them in the
order they start. A config that fits only one way can still wait on a node taken by a smaller actor.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from chunker.config import Config
from chunker.errors import SetupError

TASK_CPUS = 1.0  # the listing and intake tasks: Ray's default, the one the streaming repartition fuses with
MIN_ACTOR_CPUS = 0.05  # below this a scaled reservation means nothing; refuse instead
_EPS = 1e-9


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


@dataclass
class Fit:
    cfg: Config  # the config to run with: CPU reservations possibly scaled
    demands: list[StageDemand]
    scale: float = 1.0  # factor applied to every actor's CPU reservation
    note: str = ""  # for the log when something was changed


def stage_demands(cfg: Config) -> list[StageDemand]:
    """What each stage reserves while the pipeline runs (the read/intake tasks need one slot at least)."""
    r = cfg.ray
    return [
        StageDemand("convert", r.convert_actors, r.convert_cpus(), r.convert_num_gpus),
        StageDemand("plan", r.plan_actors, r.stage_num_cpus, 0.0),
        StageDemand("embed", r.embed_actors, r.stage_num_cpus, r.embed_num_gpus),
        StageDemand("intake", 1, TASK_CPUS, 0.0, actor=False),
    ]


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}".rstrip("0")


def _cluster_text(nodes: list[dict[str, float]]) -> str:
    cpus = sum(n.get("CPU", 0.0) for n in nodes)
    gpus = sum(n.get("GPU", 0.0) for n in nodes)
    per = ", ".join(f"{_num(n.get('CPU', 0.0))} CPU" + (f"/{_num(n['GPU'])} GPU" if n.get("GPU") else "")
                    for n in nodes)
    return f"{_num(cpus)} CPU and {_num(gpus)} GPU on {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({per})"


def _pack(demands: list[StageDemand], nodes: list[dict[str, float]]) -> StageDemand | None:
    """Place every actor, then one task, on the nodes (best fit, biggest first); the first that finds no node."""
    free = [{"CPU": n.get("CPU", 0.0), "GPU": n.get("GPU", 0.0)} for n in nodes]
    units = [d for d in demands if d.actor for _ in range(d.count)]
    units.sort(key=lambda d: (d.gpus, d.cpus), reverse=True)
    for d in units + [d for d in demands if not d.actor]:
        fits = [f for f in free if f["CPU"] + _EPS >= d.cpus and f["GPU"] + _EPS >= d.gpus]
        if not fits:
            return d
        best = min(fits, key=lambda f: (f["GPU"] - d.gpus, f["CPU"] - d.cpus))
        if d.actor:
            best["CPU"] -= d.cpus
            best["GPU"] -= d.gpus
    return None


def _scaled(demands: list[StageDemand], f: float) -> list[StageDemand]:
    return [StageDemand(d.stage, d.count, math.floor(d.cpus * f * 100) / 100 if d.actor else d.cpus, d.gpus, d.actor)
            for d in demands]


def fit_stages(cfg: Config, nodes: list[dict[str, float]]) -> Fit:
    """The config to run on ``nodes`` (each ``{"CPU": n, "GPU": m}``), or :class:`ClusterFitError`."""
    demands = stage_demands(cfg)
    have = _cluster_text(nodes)
    asked = "; ".join(d.text() for d in demands)
    if not nodes:
        raise ClusterFitError("ray: the cluster reports no alive node")
    # GPUs first: they are never scaled. Packed with no CPU demand, so a CPU shortage is reported as one.
    no_cpu = [StageDemand(d.stage, d.count, 0.0, d.gpus, d.actor) for d in demands]
    short = _pack(no_cpu, nodes)
    if short is not None:
        gpu_total = sum(d.count * d.gpus for d in demands)
        raise ClusterFitError(
            f"ray: the {short.stage} stage cannot be placed: {short.text()} does not fit next to the other stages "
            f"(they ask {_num(gpu_total)} GPU in all: {asked}); the cluster has {have}. Lower ray.{short.stage}_actors "
            f"or ray.{short.stage}_num_gpus (embedding can run on CPU: ray.embed_num_gpus=0, embed.device=cpu)"
        )
    if _pack(demands, nodes) is None:
        return Fit(cfg, demands)
    actor_cpus = sum(d.count * d.cpus for d in demands if d.actor)
    total = sum(n.get("CPU", 0.0) for n in nodes)
    if not cfg.ray.fit_to_cluster:
        short = _pack(demands, nodes)
        raise ClusterFitError(
            f"ray: the {short.stage if short else 'intake'} stage cannot be placed: the stages reserve "
            f"{_num(actor_cpus)} CPU for actors plus {_num(TASK_CPUS)} per intake task ({asked}) and the cluster has "
            f"{have}; lower ray.stage_num_cpus / ray.convert_num_cpus, or set ray.fit_to_cluster=true"
        )
    f = min(1.0, max(0.0, total - TASK_CPUS) / actor_cpus) if actor_cpus else 1.0
    while f > 0:
        scaled = _scaled(demands, f)
        if all(d.cpus >= MIN_ACTOR_CPUS for d in scaled if d.actor and d.count) and _pack(scaled, nodes) is None:
            r = cfg.ray
            stage = max(MIN_ACTOR_CPUS, math.floor(r.stage_num_cpus * f * 100) / 100)
            ray = r.model_copy(update={"stage_num_cpus": stage,
                                       "convert_num_cpus": math.floor(r.convert_cpus() * f * 100) / 100})
            note = (f"ray: the stages reserve {_num(actor_cpus)} CPU for actors plus {_num(TASK_CPUS)} per intake task "
                    f"but the cluster has {have}: actor CPU reservations scaled by {f:.2f} to "
                    f"{'; '.join(d.text() for d in scaled)} (ray.fit_to_cluster)")
            return Fit(cfg.model_copy(update={"ray": ray}), scaled, f, note)
        f = math.floor((f - 0.05) * 100) / 100
    raise ClusterFitError(
        f"ray: the stages cannot be placed even with their CPU reservations scaled down: they ask {asked} and the "
        f"cluster has {have}; use fewer actors (ray.convert_actors, ray.embed_actors) or a bigger cluster"
    )


def multi_node_problems(cfg: Config, output_uri: str, nodes: int) -> list[str]:
    """Settings that only work on one machine, when the cluster has several (one line each; empty: fine): the
    checks of :func:`chunker.deploy_checks.cluster_path_problems`, applied to the run's actual output URI."""
    from chunker.deploy_checks import cluster_path_problems

    run = cfg.model_copy(update={"output": cfg.output.model_copy(update={"dir": output_uri})})
    return cluster_path_problems(run, nodes)
