"""One job, several driver processes: how the stages are shared out, and how their summaries become one.

A driver (the process that runs a Ray Data pipeline and writes to Milvus) passes a bounded number of pages per
second (``python -m jobs.benchmark dryrun``). ``jobs.ingest --drivers N`` runs N of them inside one job, each over
shard I of N of the inputs (``chunker.run.listing.Shard``), in the job's run folder ``shard-I-of-N``. The job lists
the input once, fits all drivers' stages to the cluster together (one autoscaler request), and merges the drivers'
summaries. Pure functions: ``jobs.drivers`` runs the processes.

The stage counts of the config are the job's: ``ray.convert_actors=8`` with two drivers is four conversion actors
each. Every driver needs an actor of every stage, so a GPU stage with fewer actors than drivers is refused (more
GPUs are the operator's call); a CPU stage is raised to one actor per driver.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chunker.config import Config
from chunker.intake.inputs import InputError

MAX_PROBLEMS = 1000  # in the merged summary, as in a driver's (chunker.run.writer)


@dataclass(frozen=True)
class DriverRole:
    """What makes a run one driver of a ``--drivers`` job: its shard's listing and its config were made by the job
    (no listing walk, no fit, no autoscaler request of its own); it touches ``started_file`` once its pipeline
    starts, so the job can withdraw the request the pipelines now cover."""

    started_file: str


def split(total: int, n: int) -> list[int]:
    """``total`` as ``n`` counts as even as possible, largest first."""
    base, extra = divmod(total, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def job_config(cfg: Config, drivers: int) -> tuple[Config, list[str]]:
    """The config the job fits to the cluster (counts of every driver together) and a note per change; or
    :class:`InputError` for a GPU stage with fewer actors than drivers."""
    r = cfg.ray
    if r.convert_actors < drivers:
        raise InputError(f"--drivers {drivers}: ray.convert_actors={r.convert_actors} gives some driver no "
                         f"conversion actor; raise ray.convert_actors to at least {drivers} or use fewer drivers")
    if r.embed_num_gpus and r.embed_actors < drivers:
        raise InputError(f"--drivers {drivers}: ray.embed_actors={r.embed_actors} with ray.embed_num_gpus="
                         f"{r.embed_num_gpus:g} gives some driver no embedding actor; raise ray.embed_actors to at "
                         f"least {drivers}, embed on CPU, or use fewer drivers")
    notes, update = [], {}
    for stage in ("plan", "embed"):
        count = getattr(r, f"{stage}_actors")
        if count < drivers:
            update[f"{stage}_actors"] = drivers
            notes.append(f"ray.{stage}_actors {count} -> {drivers}: one per driver (--drivers {drivers})")
    return cfg.model_copy(update={"ray": r.model_copy(update=update)}), notes


def driver_configs(job: Config, drivers: int) -> list[Config]:
    """The fitted job config shared out: driver i gets its part of every stage's actors (CPU reservations as fitted)."""
    r = job.ray
    shares = {f"{stage}_actors": split(getattr(r, f"{stage}_actors"), drivers)
              for stage in ("convert", "plan", "embed")}
    return [job.model_copy(update={"ray": r.model_copy(update={k: v[i] for k, v in shares.items()})})
            for i in range(drivers)]


_SUMS = ("documents", "ok", "partial", "failed", "skipped", "pages", "chunks", "fallback_pages", "problems_total")


# The chunk-health headline figures that add up over drivers (chunker.plan.health).
_HEALTH_COUNTS = ("chunks", "fragments", "lead_in_only", "tables", "column_n_tables", "pathless_tables")


def merge_summaries(parts: list[dict[str, Any]], *, seconds: float, collection_rows: int, output: str,
                    cluster: str, settings: dict[str, Any]) -> dict[str, Any]:
    """One summary (``summary.json``'s fields) for the job from its drivers' own: counts added up, throughput over
    the job's wall time, every driver's problems (up to ``MAX_PROBLEMS``), and each driver in brief."""
    out: dict[str, Any] = {k: sum(int(p.get(k) or 0) for p in parts) for k in _SUMS}
    hashes = sorted({str(p.get("config_hash") or "") for p in parts})
    modes = sorted({m for p in parts for m in str(p.get("load_mode") or "none").split("+") if m != "none"})
    firsts = [p["timing"]["first_segment_s"] for p in parts if (p.get("timing") or {}).get("first_segment_s")]
    steady = [p["timing"]["steady_pages_per_s"] for p in parts if (p.get("timing") or {}).get("steady_pages_per_s")]
    out.update(
        seconds=round(seconds, 2), pages_per_s=round(out["pages"] / seconds, 3) if seconds else 0.0,
        collection_rows=collection_rows, config_hash=",".join(hashes), settings=settings, cluster=cluster,
        output=output, load_mode="+".join(modes) or "none",
        problems=[q for p in parts for q in p.get("problems") or []][:MAX_PROBLEMS],
        timing={"drivers": len(parts), "whole_s": round(seconds, 2),
                **({"first_segment_s": min(firsts)} if firsts else {}),
                # Each driver's steady rate is over its own window; the windows overlap, so their sum is the job's.
                **({"steady_pages_per_s": round(sum(steady), 3)} if len(steady) == len(parts) else {})},
        drivers=[{k: p.get(k) for k in ("output", "documents", "ok", "partial", "failed", "skipped", "pages",
                                        "seconds", "pages_per_s")} for p in parts],
    )
    healths = [p["health"] for p in parts if p.get("health")]
    if healths:  # each driver wrote its own report in its run folder; the job's headline adds them up
        health = {k: sum(int(h.get(k) or 0) for h in healths) for k in _HEALTH_COUNTS}
        health["fragment_share"] = round(health["fragments"] / health["chunks"], 4) if health["chunks"] else 0.0
        out["health"] = health
    return out
