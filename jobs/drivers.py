"""``jobs.ingest --drivers N``: N driver processes over disjoint shards of the input, inside one job.

One driver passes a bounded number of pages per second (``python -m jobs.benchmark dryrun``). This runs N in one
submission, on the node the job's entrypoint runs on (the head), each a ``python -m jobs.ingest`` process joined to
the same cluster, as an operator of a large cluster wants it: one ``ray job submit``, one ``ray job stop``, one
summary; the input listed once (each path goes to the listing of the shard that holds it), one fit of every
driver's stages against the cluster with one autoscaler request for all of them (re-asserted while it waits,
withdrawn once every pipeline has started and on every way out), and one Milvus collection, made once before the
drivers start. Each driver runs in ``OUTPUT/shard-I-of-N`` with a ledger of its own, exactly as ``--shard I/N``
would; re-submitting the job resumes every shard.

A driver that fails stops the job: the others are sent SIGTERM (they close their run cleanly), the job withdraws its
request and exits with the failing driver's line already printed by it. ``ray job stop`` reaches every driver
itself (Ray signals the job's process group); the job forwards SIGTERM to its drivers too, for a stop of the job
process alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from chunker.config import Config, runtime_settings
from chunker.errors import SetupError
from chunker.intake.inputs import InputError
from chunker.run.drivers import driver_configs, job_config, merge_summaries
from chunker.run.layout import SUMMARY, RunStore, child_run
from chunker.run.listing import Shard, direct_manifest, write_listings
from jobs.claim import Claim, exit_on_sigterm
from jobs.common import fit_to_cluster, init_ray

log = logging.getLogger("jobs.drivers")
POLL_S = 0.5
STOP_WAIT_S = 30.0  # a driver sent SIGTERM closes its run (store, request) within this, or is killed


class DriverFailed(SetupError):
    """A driver of the job exited with an error (its own line says why); the others were stopped."""


@dataclass(frozen=True)
class DriverSpec:
    """What one driver process is started with."""

    shard: Shard
    config_path: str  # its share of the fitted config, as YAML
    started_file: str  # touched by the driver once its pipeline starts
    input_path: str
    output: str  # the job's output; the driver runs in its shard's folder inside it
    force: bool
    verbose: bool


def ingest_argv(spec: DriverSpec) -> list[str]:
    """The command of one driver: ``jobs.ingest`` for its shard, as a driver of this job."""
    argv = [sys.executable, "-m", "jobs.ingest", "--config", spec.config_path, "--input", spec.input_path,
            "--output", spec.output, "--shard", f"{spec.shard.index}/{spec.shard.count}",
            "--driver-of-job", spec.started_file]
    return argv + (["--force"] if spec.force else []) + (["--verbose"] if spec.verbose else [])


def run_drivers(cfg: Config, input_path: str, output: str | None, drivers: int, *, force: bool = False,
                verbose: bool = False, driver_argv: Callable[[DriverSpec], list[str]] = ingest_argv) -> dict[str, Any]:
    """Run the job's ``drivers`` drivers to the end; returns the merged summary (also written to the output's
    ``summary.json``). ``driver_argv`` builds each driver's command (the dry-run benchmark runs its own stages)."""
    from chunker.index.embed import Embedder
    from chunker.index.store import ChunkStore, is_server_uri
    from chunker.intake.sources import kind

    t0 = time.perf_counter()
    if not is_server_uri(cfg.milvus.uri):
        raise InputError(f"--drivers {drivers}: the drivers of a job load one collection at once, which Milvus Lite "
                         f"({cfg.milvus.uri}) cannot share between processes; use a Milvus server (milvus.uri)")
    out_uri = output or cfg.output.dir
    root = RunStore(out_uri)
    root.check()
    job, notes = job_config(cfg, drivers)
    shards = Shard.all(drivers)
    outs = [child_run(out_uri, s.name) for s in shards]
    if direct_manifest(input_path):  # each driver reads its lines of the manifest (Ray reads it)
        if kind(input_path) != "file":
            raise InputError(f"manifest {input_path!r} does not exist")
    else:
        listings = write_listings(input_path, cfg, [RunStore(u) for u in outs], count=drivers)
        log.warning("listed %d inputs once for %d drivers (%s)", sum(x.entries for x in listings), drivers,
                    ", ".join(str(x.entries) for x in listings))
    init_ray(job, verbose)
    exit_on_sigterm()  # ray job stop: the finally below withdraws the request and stops the drivers
    import ray

    claim, procs, work = Claim(), [], tempfile.mkdtemp(prefix="vc-drivers-")
    dim = Embedder.dimension(cfg.embed)
    try:
        with ChunkStore(cfg.milvus, dim):  # the collection made once, before the drivers race to make it
            pass
        fit = fit_to_cluster(job, out_uri, input_path, claim, drivers=drivers)
        # The drivers join this cluster: a local runtime this process started, or the cluster it joined.
        env = dict(os.environ, RAY_ADDRESS=ray.get_runtime_context().gcs_address)
        specs = []
        for shard, part in zip(shards, driver_configs(fit.cfg, drivers)):
            path = Path(work) / f"driver-{shard.index}.yaml"
            path.write_text(yaml.safe_dump(part.model_dump(mode="json"), sort_keys=False))
            specs.append(DriverSpec(shard, str(path), str(Path(work) / f"started-{shard.index}"), input_path,
                                    out_uri, force, verbose))
        procs = [subprocess.Popen(driver_argv(spec), env=env) for spec in specs]
        codes = _watch(procs, [Path(s.started_file) for s in specs], claim)
    finally:
        claim.withdraw()
        _stop(procs)
        shutil.rmtree(work, ignore_errors=True)
    failed = [(i + 1, rc) for i, rc in enumerate(codes) if rc]
    if failed:
        raise DriverFailed(f"driver {failed[0][0]} of {drivers} exited with code {failed[0][1]} (its error is above); "
                           f"the other drivers were stopped")
    parts = [RunStore(u).read_json(SUMMARY) for u in outs]
    with ChunkStore(cfg.milvus, dim) as store:
        rows = store.count()
    merged = merge_summaries(parts, seconds=time.perf_counter() - t0, collection_rows=rows, output=root.root,
                             cluster="; ".join(x for x in [*notes, fit.summary()] if x),
                             settings={**runtime_settings(fit.cfg), "drivers": drivers})
    root.write_json(SUMMARY, merged)
    return merged


def _watch(procs: list[subprocess.Popen], started: list[Path], claim: Claim) -> list[int | None]:
    """Wait for the drivers; withdraw the request once every pipeline has started (or its driver ended); stop at
    the first driver that fails. Returns the exit codes (None: still running, to be stopped)."""
    while True:
        codes = [p.poll() for p in procs]
        if claim.standing and all(f.exists() or rc is not None for f, rc in zip(started, codes)):
            claim.withdraw()  # every pipeline's own Ray Data requester asks from here (see jobs.claim)
        if any(codes) or all(rc is not None for rc in codes):
            return codes
        time.sleep(POLL_S)


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to the drivers still running (they close their runs), then SIGKILL to any that did not end."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT_S
    for p in running:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
