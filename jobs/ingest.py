"""Ingest: intake -> render -> convert -> parse -> plan -> embed -> Milvus, as one streaming Ray Data pipeline.

    python -m jobs.ingest --config configs/local.yaml --input samples/ [--output DIR] [--force] [--set key=value ...]
    ray job submit --working-dir . -- python -m jobs.ingest --config configs/qwen2.5-vl-7b.yaml \
        --input s3://corpus/pdfs/ --output s3://corpus/runs/r1 --set milvus.uri=http://milvus:19530

Inputs: a folder, glob, object-store prefix (s3://, gs://, file://), single file or manifest; PDFs, images and
DOCX/PPTX/XLSX (normalised to PDF). Each stage's rows are persisted as Parquet under the output folder (batches/,
elements/, chunks/, documents/), with summary.json at the end. The driver is the one Milvus writer (Milvus Lite
allows one process per data dir). Re-submitting the same job skips documents in the done ledger; --force redoes all.

One driver passes a bounded number of pages per second (its Ray Data executor, row decoding, the Milvus client: see
BENCHMARKS.md, python -m jobs.benchmark dryrun). Past it, --drivers N runs N driver processes in this one job, each
over a disjoint part of the input (by a hash of each path, the same part on every re-run) with a run folder and
ledger of its own under OUTPUT/shard-I-of-N, all loading one Milvus server; the input is listed once, one autoscaler
request covers them all, and one summary is written (jobs.drivers). --shard I/N runs one such part as a job of its
own (another cluster, or one part again).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chunker.config import Config, config_hash, runtime_settings
from chunker.errors import SetupError, find_setup_error
from chunker.intake.inputs import InputError
from chunker.run import faults
from chunker.run.layout import ATTEMPTS, SUMMARY, RunStore
from chunker.run.ledger import Ledger, store_target
from chunker.run.drivers import DriverRole
from chunker.run.listing import Shard
from chunker.run.rows import SegmentRow
from chunker.run.timing import RunTiming
from chunker.run.writer import Writer
from chunker.cli import ExitCode, base_parser, ingest_exit_code, load_or_exit
from chunker.run.cluster import Fit
from jobs.claim import Claim, exit_on_sigterm
from jobs.common import conversion_remote_args, fit_to_cluster, init_ray, on_every_node, preflight, setup_logging
from jobs.drivers import run_drivers
from jobs.progress import ConvertedPages, Progress, run_key
from jobs.stages import ConvertStage, EmbedStage, PlanStage, intake_batch

log = logging.getLogger("jobs.ingest")


@dataclass
class RunSummary:
    documents: int = 0
    ok: int = 0
    partial: int = 0
    failed: int = 0
    skipped: int = 0
    pages: int = 0
    chunks: int = 0
    fallback_pages: int = 0
    seconds: float = 0.0
    pages_per_s: float = 0.0
    collection_rows: int = 0
    config_hash: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  # the unhashed (runtime) settings this run used
    cluster: str = ""  # what the pre-start check changed to fit the cluster, if anything
    output: str = ""
    load_mode: str = ""
    problems_total: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    timing: dict[str, Any] = field(default_factory=dict)  # where the time went (chunker.run.timing)
    health: dict[str, Any] = field(default_factory=dict)  # the chunk-health headline (chunker.plan.health)
    drivers: list[dict[str, Any]] = field(default_factory=list)  # --drivers N: each driver's run in brief


def input_dataset(input_path: str, cfg: Config, listed: list[str] | None,
                  shard: Shard | None = None):  # noqa: ANN201 - ray.data.Dataset
    """The input rows: a dataset reading a manifest (the lines of ``shard``) or the listing parts the driver wrote,
    or the rows themselves (a list) when the listing is one part."""
    import ray

    from chunker.run.listing import manifest_base, manifest_batch

    if listed is None:
        uris, base = [input_path], manifest_base(input_path)
    elif not listed:
        return None
    elif len(listed) == 1:
        # One listing part (at most intake.listing_block inputs): its rows go in from the driver. Ray's read task
        # and the manifest task behind it would each wait for a worker process while every stage's actors start
        # and import on the same cores: on 2 cores the listing reached intake 18 s after the pipeline started.
        rows = manifest_batch({"text": _read_lines(listed[0])}, base_uri="")
        return [dict(zip(rows, values)) for values in zip(*rows.values())] or None
    else:
        uris, base = listed, ""
    ds = ray.data.read_text(uris)
    # The listing parts hold this shard's inputs already; a manifest's lines are picked here.
    return ds.map_batches(manifest_batch, fn_kwargs={"base_uri": base, "shard": shard if listed is None else None})


def _read_lines(uri: str) -> list[str]:
    from chunker.intake import sources

    with tempfile.TemporaryDirectory(prefix="listing-") as tmp:
        if sources.is_remote(uri):
            local = Path(tmp) / "part.jsonl"
            sources.fetch(uri, local)
        else:
            local = Path(sources.local_path(uri))
        return local.read_text(encoding="utf-8").splitlines()


def build_dataset(cfg: Config, files: Any, out_uri: str, cfg_hash: str, force: bool = True, target: str = "",
                  convert_stage: type = ConvertStage, embed_stage: type = EmbedStage):  # noqa: ANN201 - ray.data.Dataset
    """The pipeline over ``files``: a list of ``{"path", "source"}`` dicts or a dataset of such rows.

    Blocks decide everything in Ray Data: a map task or actor call takes one block, and its output leaves only when
    the call ends (ray/data/_internal/planner/plan_udf_map_op.py; an async batch UDF runs at most 4 rows of a block
    at once). Input rows are tiny, so one read task would hand a whole listing part to one intake task and the
    whole intake output, hundreds of segments, to one conversion call. So inputs are cut into blocks of
    ``ray.intake_block_rows`` for intake, and intake's output into one segment per block: each conversion call is one
    segment, ``ray.convert_concurrency`` calls run per actor, and each segment moves on (committed, ledgered,
    retried) alone. Task stages take 1 CPU, Ray's default, so the streaming repartition fuses into the intake task.
    The plan and embedding stages take converted segments in bundles (``ray.post_convert_batch``).
    """
    import ray
    from ray.data import ActorPoolStrategy

    r = cfg.ray
    cpu = r.stage_num_cpus
    # A dead actor comes back (its constructor reloads the model) and its in-flight batch runs again, also when its
    # node is gone (chunker.run.attempts stops a segment that kills its worker every time).
    restart = {"max_restarts": r.actor_max_restarts, "max_task_retries": r.actor_max_task_retries}
    if restart == {"max_restarts": -1, "max_task_retries": -1}:
        # Ray Data's own defaults for actor stages (actor_pool_map_operator.py: _apply_default_remote_args); passing
        # them again goes through the deprecated ``**ray_remote_args`` and warns.
        restart = {}
    if isinstance(files, ray.data.Dataset):
        ds = files.repartition(target_num_rows_per_block=r.intake_block_rows)
    else:  # rows held here: cut into intake blocks now, so no repartition task stands before the first intake
        ds = ray.data.from_items(files, override_num_blocks=max(1, math.ceil(len(files) / r.intake_block_rows)))
    ds = ds.map_batches(intake_batch, batch_size=1, fn_kwargs={
        "cfg": cfg, "out_uri": out_uri, "cfg_hash": cfg_hash, "target": target, "force": force})
    ds = ds.repartition(target_num_rows_per_block=1)
    ds = ds.map_batches(
        convert_stage, fn_constructor_kwargs={"cfg": cfg, "cfg_hash": cfg_hash, "out_uri": out_uri},
        batch_size=1, num_cpus=r.convert_cpus(), num_gpus=r.convert_num_gpus or None,
        # No queue behind an actor's running segments: a free actor elsewhere takes the next one.
        compute=ActorPoolStrategy(size=r.convert_actors, max_concurrent_calls_per_actor=r.convert_concurrency,
                                  max_tasks_in_flight_per_actor=r.convert_concurrency),
        **restart, **conversion_remote_args(cfg),
    )
    # After conversion, segments travel in bundles of ``ray.post_convert_batch``: every block costs the driver's
    # Ray Data executor a task dispatch and a pass of its resource accounting (~10-20 ms of driver CPU per task on
    # 2 busy cores, python -m jobs.benchmark dryrun), and a segment no longer needs a block of its own once converted.
    ds = ds.map_batches(
        PlanStage, fn_constructor_kwargs={"cfg": cfg, "cfg_hash": cfg_hash, "out_uri": out_uri},
        batch_size=r.post_convert_batch, num_cpus=cpu, **restart,
        compute=ActorPoolStrategy(size=r.plan_actors, max_concurrent_calls_per_actor=r.plan_concurrency,
                                  max_tasks_in_flight_per_actor=r.plan_concurrency),
    )
    ds = ds.map_batches(
        embed_stage, fn_constructor_kwargs={"cfg": cfg}, batch_size=r.post_convert_batch, num_cpus=cpu,
        num_gpus=r.embed_num_gpus or None, compute=ActorPoolStrategy(size=r.embed_actors), **restart,
    )
    # Above the per-segment timeout: with one segment per block something moves at least that often.
    ds.context.execution_no_progress_timeout_s = r.effective_no_progress_timeout_s()
    return ds


def check_cluster(cfg: Config, out_uri: str, input_uri: str, claim: Claim) -> Fit:
    """The config sized to the cluster and what its autoscaler can add, once the nodes the stages need are there
    (see :func:`jobs.common.fit_to_cluster`; asked through ``claim``), or :class:`ClusterFitError`."""
    return fit_to_cluster(cfg, out_uri, input_uri, claim)


def _bulk_factory(store: Any, cfg: Config):  # noqa: ANN202
    from chunker.index.bulk import PymilvusBulkOps

    # The sink builds it at once on a server: a wrong bulk target, endpoint or key fails before any work.
    return lambda: PymilvusBulkOps(store, cfg.milvus)


def run_ingest(cfg: Config, input_path: str, output: str | None = None, force: bool = False,
               convert_stage: type = ConvertStage, bulk: Any = None, verbose: bool = True,
               embed_stage: type = EmbedStage, shard: Shard | None = None,
               role: DriverRole | None = None) -> RunSummary:
    """Run the whole pipeline; ``bulk`` injects :class:`chunker.index.bulk.BulkOps` (tests); ``convert_stage`` and
    ``embed_stage`` replace the model stages (tests, the dry-run benchmark). ``shard`` takes that part of the inputs
    into a run folder of its own inside ``output`` (see :class:`chunker.run.listing.Shard`); with ``role`` the run is
    one driver of a ``--drivers`` job, whose listing and fit it takes as they are (see :mod:`jobs.drivers`).
    ``verbose=False`` keeps Ray's own progress and log lines and the workers' output off the terminal (see
    :func:`jobs.common.init_ray`)."""
    from chunker.index.bulk import ChunkSink
    from chunker.index.embed import Embedder
    from chunker.index.store import ChunkStore, is_server_uri
    from chunker.intake.sources import kind
    from chunker.run.layout import child_run
    from chunker.run.listing import direct_manifest, read_listing, write_listing

    timing = RunTiming()
    t0 = timing.t0
    faults.announce()  # tests only: a run with CHUNKER_FAULTS set says so (and a malformed value stops it here)
    out_uri = output or cfg.output.dir
    if shard is not None:
        if not is_server_uri(cfg.milvus.uri):
            raise InputError(f"--shard: the shards of a job load one collection at once, which Milvus Lite "
                             f"({cfg.milvus.uri}) cannot share between processes; use a Milvus server (milvus.uri)")
        out_uri = child_run(out_uri, shard.name)
    runstore = RunStore(out_uri)
    runstore.check()  # a missing or unreachable output bucket: one line now, not a traceback from the listing
    h = config_hash(cfg)
    target = store_target(cfg.milvus.uri, cfg.milvus.collection)
    if direct_manifest(input_path) and kind(input_path) != "file":
        raise InputError(f"manifest {input_path!r} does not exist")
    # Listing first, before Ray starts: a wrong input fails fast. Only manifests skip it (Ray reads them), and a
    # driver of a --drivers job, whose listing the job wrote.
    with timing.step("listing"):
        if direct_manifest(input_path):
            listed = None
        elif role is not None:
            listed = read_listing(runstore)
        else:
            listed = write_listing(input_path, cfg, runstore, shard)
        runstore.clear(ATTEMPTS)  # conversion starts are counted per run
    with timing.step("ray_init"):
        init_ray(cfg, verbose)
    exit_on_sigterm()  # ray job stop: the finally below runs
    # From here every way out withdraws the autoscaler request (jobs.claim): an error, SIGTERM, or the end.
    claim, store, started = Claim(), None, False
    try:
        with timing.step("store_open"):
            dim = Embedder.dimension(cfg.embed)
            store = ChunkStore(cfg.milvus, dim)
        # Before any actor starts: what cannot be placed, or cannot work on this cluster, is one clear line. A driver
        # of a --drivers job runs the share of the stages the job fitted.
        fit = check_cluster(cfg, out_uri, input_path, claim) if role is None else Fit(cfg, [])
        cfg, fit_note = fit.cfg, fit.summary()
        sink = ChunkSink(store, cfg.milvus, bulk or _bulk_factory(store, cfg))
        ledger = Ledger(out_uri, h, target)
        commit_rows = cfg.milvus.upsert_batch if store.lite else cfg.milvus.bulk_threshold
        with Progress(cfg.ray.status_interval_s, total=listed.entries if listed is not None else None,
                      converted=ConvertedPages(run_key(out_uri, h))) as progress:
            writer = Writer(store, sink, ledger, runstore, h, cfg.converter.max_fallback_share, commit_rows,
                            cfg.milvus.commit_interval_s, progress, timing,
                            max_pending_rows=cfg.milvus.commit_max_pending_rows,
                            write_threads=cfg.output.write_threads)
            inputs = input_dataset(input_path, cfg, listed, shard)
            if inputs is not None:
                ds = build_dataset(cfg, inputs, out_uri, h, force=force, target=target, convert_stage=convert_stage,
                                   embed_stage=embed_stage)
                started = True
                _pipeline_starts(claim, role)
                with timing.step("pipeline"):  # rows flowing in; every other driver step nests inside
                    writer.consume(_timed_rows(ds.iter_rows(), timing))
            writer.flush_doc_rows()
        with timing.step("finish"):
            store.flush()
            collection_rows = store.count()
    finally:
        claim.withdraw()  # the autoscaler may scale the run's nodes away again
        with timing.step("finish"):
            if store is not None:
                store.close()
            if started:
                _remove_fetch_caches(out_uri)
    t = writer.totals
    dt = time.perf_counter() - t0
    modes = sorted(set(sink.stats.modes))
    summary = RunSummary(
        documents=t.documents, ok=t.by_status.get("ok", 0), partial=t.by_status.get("partial", 0),
        failed=t.by_status.get("failed", 0), skipped=t.by_status.get("skipped", 0), pages=t.pages,
        chunks=t.chunks, fallback_pages=t.fallback_pages, seconds=round(dt, 2),
        pages_per_s=round(t.pages / dt, 3) if dt else 0.0, collection_rows=collection_rows, config_hash=h,
        settings=runtime_settings(cfg), cluster=fit_note, output=runstore.root, load_mode="+".join(modes) or "none",
        problems_total=t.problems_total,
        problems=t.problems,
        timing=timing.report(),
    )
    if cfg.output.chunk_health and t.chunks:
        with timing.step("health"):
            summary.health = chunk_health(runstore)
        summary.timing = timing.report()
    runstore.write_json(SUMMARY, asdict(summary))
    return summary


def chunk_health(runstore: RunStore) -> dict[str, Any]:
    """Write the run folder's chunk-health report beside its chunks and return its headline figures."""
    from chunker.run.report import health_for_run, write_health

    report = health_for_run(runstore)
    write_health(runstore, report)
    return {k: report[k] for k in ("chunks", "fragments", "fragment_share", "lead_in_only", "tables",
                                   "column_n_tables", "pathless_tables")}


def _pipeline_starts(claim: Claim, role: DriverRole | None) -> None:
    """The pipeline's own Ray Data requester asks the autoscaler for what it runs from now on: the job's request
    goes (it would count against the pipeline's share in Ray Data's coordinator, see jobs.claim), and a driver of a
    --drivers job tells the job so."""
    claim.withdraw()
    if role is not None:
        Path(role.started_file).touch()


def _timed_rows(rows: Any, timing: RunTiming) -> Any:
    """Decoded rows, each noted on arrival with the seconds every stage spent on it."""
    for raw in rows:
        with timing.step("decode"):
            row = SegmentRow.decode(raw)
        timing.segment(row.pages if row.active else 0, row.worker_seconds())
        yield row


def _remove_fetch_caches(out_uri: str) -> None:
    """Each node's cache of this run's fetched inputs goes when the run ends (best effort: a node that is gone took
    its disk with it)."""
    from chunker.intake import cache

    try:
        on_every_node(cache.remove, str(cache.run_folder(out_uri)))
    except Exception as exc:  # noqa: BLE001 - cleanup never turns a finished run into a failed one
        log.warning("fetch caches not removed: %s", exc)


def print_summary(s: RunSummary) -> None:
    print(f"\n== ingest summary ({s.output}) ==")
    print(f"documents: {s.documents}  ok: {s.ok}  partial: {s.partial}  failed: {s.failed}  skipped: {s.skipped}")
    print(f"pages: {s.pages}  chunks: {s.chunks}  fallback pages: {s.fallback_pages}  "
          f"collection rows: {s.collection_rows}  load: {s.load_mode}")
    print(f"time: {s.seconds:.1f} s  throughput: {s.pages_per_s:.2f} pages/s  config hash: {s.config_hash}")
    t = s.timing
    if t.get("first_segment_s") is not None:
        steady = f"{t['steady_pages_per_s']:.2f} pages/s" if t.get("steady_pages_per_s") else "n/a (too short)"
        print(f"start-up: first segment after {t['first_segment_s']:.1f} s  steady: {steady}")
    if s.health:
        h = s.health
        print(f"chunk health: {100 * h['fragment_share']:.1f}% under 250 chars, {h['lead_in_only']} lead-ins alone, "
              f"{h['column_n_tables']} of {h['tables']} tables under 'Column N', {h['pathless_tables']} without a "
              f"column path (chunk_health.txt/.png in the run folder)")
    if s.drivers:
        print(f"drivers: {len(s.drivers)}  " + "  ".join(f"{Path(str(d['output'])).name}: {d['documents']} documents, "
                                                         f"{d['pages_per_s']} pages/s" for d in s.drivers))
    for p in s.problems:
        print(f"  {p['status']:8s} {p['source']}: {p['reason']}")
    if s.problems_total > len(s.problems):
        print(f"  ... {s.problems_total - len(s.problems)} more in {s.output}/documents/")


def main(argv: list[str] | None = None, prog: str = "python -m jobs.ingest") -> int:
    p = base_parser("Ingest PDFs into Milvus through the Ray Data pipeline.", prog)
    p.add_argument("--input", required=True,
                   help="a directory, glob, single file, manifest (.txt/.jsonl) or s3:// / gs:// / file:// URI")
    p.add_argument("--output", default=None, help="run output folder or URI (default: output.dir from the config)")
    p.add_argument("--force", action="store_true", help="redo every document, ignoring the done ledger")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="take shard I of N of the inputs (by a hash of each path), into OUTPUT/shard-I-of-N: N jobs "
                        "over the same input share the work, each with a driver of its own (needs a Milvus server)")
    p.add_argument("--drivers", type=int, default=1, metavar="N",
                   help="run N driver processes in this job, each over shard I of N of the inputs (OUTPUT/shard-I-"
                        "of-N): the input listed once, one autoscaler request, one summary; the stage counts of the "
                        "config are the job's (needs a Milvus server; see cluster/README.md)")
    p.add_argument("--driver-of-job", default=None, help=argparse.SUPPRESS)  # set by --drivers for its drivers
    p.add_argument("--verbose", action="store_true",
                   help="also show Ray's progress and log lines, worker output and library INFO logs")
    args = p.parse_args(argv)
    setup_logging(args.verbose)
    cfg = load_or_exit(args)
    role = DriverRole(args.driver_of_job) if args.driver_of_job else None
    try:
        shard = Shard.parse(args.shard) if args.shard else None
        if args.drivers < 1 or (args.drivers > 1 and shard is not None):
            raise InputError(f"--drivers {args.drivers}: want N >= 1, and not with --shard (the drivers take the "
                             f"shards 1/N .. N/N themselves)")
        preflight(cfg)
        if args.drivers > 1:
            summary = RunSummary(**run_drivers(cfg, args.input, args.output, args.drivers, force=args.force,
                                               verbose=args.verbose))
        else:
            summary = run_ingest(cfg, args.input, args.output, force=args.force, verbose=args.verbose, shard=shard,
                                 role=role)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        setup = exc if isinstance(exc, SetupError) else find_setup_error(exc)
        if setup is None:
            raise  # a defect: keep the traceback
        print(f"error: {setup}", file=sys.stderr)
        return 3
    if role is not None:  # a driver of a --drivers job leaves the summary to the job
        return ExitCode.OK
    print_summary(summary)
    code = ingest_exit_code(summary.documents, summary.ok, summary.partial, summary.skipped)
    if code != ExitCode.OK:
        print(f"error: none of the {summary.documents} documents was indexed (see the reasons above)", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
