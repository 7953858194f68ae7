"""Settings of where and how the work runs: the Ray stages, the run folder, the query endpoint."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from chunker.config.base import _Section


class NodeTypeConfig(_Section):
    name: str = Field("worker", description="The node type's name (what the job's messages call it).")
    cpus: float = Field(..., gt=0, description="Logical CPUs of one node of this type (its Ray CPU resource).")
    gpus: float = Field(0.0, ge=0, description="GPUs of one node of this type.")
    max_nodes: int = Field(..., ge=1, description="Most nodes of this type the autoscaler may run at once.")


class RayConfig(_Section):
    address: str | None = Field(None, description="Ray address; none: join RAY_ADDRESS or start a local runtime.")
    local_num_cpus: int | None = Field(
        None, description="Logical CPUs of a local runtime (default: what the stages' actors reserve, rounded up, "
        "plus 2 task slots; at least the cores)."
    )
    stage_num_cpus: float = Field(
        0.5, gt=0, description="CPUs reserved per planning and embedding actor (fractional on laptops); the listing "
        "and intake tasks take 1 CPU each (Ray's default, which lets the repartition after intake fuse into its task)."
    )
    convert_actors: int = Field(2, ge=1, description="Conversion actors.")
    convert_num_gpus: float = Field(0.0, ge=0, description="GPUs per conversion actor.")
    convert_num_cpus: float | None = Field(
        None, gt=0, description="CPUs reserved per conversion actor (none: stage_num_cpus). Give a GPU actor the cores "
        "its page rendering and image preprocessing use: Ray sets OMP_NUM_THREADS from it and packs other stages "
        "onto the CPUs it does not reserve."
    )
    convert_concurrency: int = Field(8, ge=1, description="Document chains in flight per conversion actor.")
    plan_actors: int = Field(
        1, ge=1, description="Planning actors (parse + chunk plan + the segment's Parquet parts; stage_num_cpus "
        "each). Every converted segment passes through them: one actor plans a few hundred segments per second "
        "(python -m jobs.benchmark dryrun); add actors when the GPUs convert more."
    )
    plan_concurrency: int = Field(
        4, ge=1, description="Segments in flight per planning actor: while one segment's parts are written to "
        "object storage (round trips of tens of milliseconds), the next one is planned."
    )
    post_convert_batch: int = Field(
        8, ge=1, description="Converted segments per call of the planning and embedding stages (Ray Data bundles "
        "them): each call is a task the driver's Ray Data executor dispatches and accounts for, ~10-20 ms of driver "
        "CPU each on 2 busy cores, so one call per segment capped the driver (python -m jobs.benchmark dryrun). A "
        "bundle waits until it is full or the conversions are done."
    )
    embed_actors: int = Field(1, ge=1, description="Embedding actors.")
    embed_num_gpus: float = Field(0.0, ge=0, description="GPUs per embedding actor.")
    document_timeout_s: float | None = Field(
        1800.0, gt=0, description="Longest one document segment may convert; past it that document fails, not the "
        "job. A last resort behind converter.page_timeout_s: with a model converter and no value given it becomes "
        "2 x the segment's model budget ((segment_pages + segment_overlap_pages) x page_timeout_s), and a value "
        "below that budget is refused (it would fail whole segments before batches fall back page by page)."
    )
    no_progress_timeout_s: float | None = Field(
        None, gt=0, description="Ray Data fails a run in which no block moves for this long (ExecutionTimeoutError). "
        "None: document_timeout_s + 600 s, at least 1,800 s (Ray's default); disabled when document_timeout_s is none. "
        "Must exceed document_timeout_s: one segment may legitimately take that long with nothing else moving."
    )
    intake_block_rows: int = Field(
        8, ge=1, description="Input files per intake task (fetched, hashed and checked one after another): smaller "
        "spreads intake over more CPUs, larger saves task overhead on huge corpora."
    )
    fit_to_cluster: bool = Field(
        True, description="When the stages reserve more CPUs than the cluster has, scale every CPU reservation down "
        "to fit (logged) instead of failing; GPU demand that does not fit always fails before any actor starts."
    )
    autoscaler: Literal["auto", "always", "never"] = Field(
        "auto", description="Fit the stages against what the cluster can become: 'auto' when an autoscaler reports "
        "its node types (Ray's GCS cluster config, or the head's autoscaling config), 'always' (node types from "
        "ray.node_types, else unknown), 'never': against the nodes alive at submit time only. Demand the alive nodes "
        "cannot hold is asked of the autoscaler (request_resources) and waited for; only demand no node type can "
        "hold is refused."
    )
    autoscale_wait_s: float = Field(
        900.0, ge=0, description="Longest the job waits, before any actor starts, for the autoscaler to add the nodes "
        "the stages need. Past it the run starts when the node types can hold the stages (their actors wait for "
        "nodes), and is refused when the node types are unknown."
    )
    node_types: list[NodeTypeConfig] = Field(
        default_factory=list, description="The node types an autoscaler can add, where the job cannot read them "
        "itself (KubeRay's autoscaler reads the RayCluster from a sidecar): e.g. "
        "[{name: gpu, cpus: 16, gpus: 1, max_nodes: 8}]. Given: used instead of what the cluster reports."
    )
    actor_max_restarts: int = Field(-1, ge=-1, description="Restarts of a dead stage actor (-1: always).")
    actor_max_task_retries: int = Field(
        -1, ge=-1, description="Retries of a batch whose actor died or became unreachable (-1: until it runs, Ray "
        "Data's default). Retries are spent while a lost node is still being detected (~20 s), so a small bound ends "
        "the whole run when a node goes; a segment that kills its worker every time is stopped by "
        "segment_max_attempts instead."
    )
    segment_max_attempts: int = Field(
        4, ge=1, description="Times a segment's conversion may start (its worker died each time before it finished) "
        "before the segment fails alone with reason 'quarantined' instead of being retried again."
    )
    status_interval_s: float = Field(30.0, gt=0, description="Seconds between the driver's progress lines.")

    @model_validator(mode="after")
    def _timeouts(self) -> "RayConfig":
        if self.no_progress_timeout_s is not None and self.document_timeout_s is not None \
                and self.no_progress_timeout_s <= self.document_timeout_s:
            raise ValueError(f"no_progress_timeout_s ({self.no_progress_timeout_s:g}) must exceed document_timeout_s "
                             f"({self.document_timeout_s:g}): one segment may take that long while nothing else moves")
        return self

    def effective_no_progress_timeout_s(self) -> float:
        """Ray Data's no-progress timeout for this run (-1: off)."""
        if self.no_progress_timeout_s is not None:
            return self.no_progress_timeout_s
        if self.document_timeout_s is None:
            return -1.0
        return max(1800.0, self.document_timeout_s + 600.0)

    def convert_cpus(self) -> float:
        return self.convert_num_cpus if self.convert_num_cpus is not None else self.stage_num_cpus


class OutputConfig(_Section):
    dir: str = Field("./output/run", description="Run output folder (local path or a pyarrow filesystem URI).")
    chunk_health: bool = Field(
        True, description="At the end of an ingest, read the run folder's chunks and elements once more and write "
        "the chunk-health report (chunk_health.json/.txt/.png: fragments, lead-ins alone, tables without column "
        "paths, the size histogram) into it, and print its headline. Off for a run folder so large that one more "
        "read of it is not worth it; python -m jobs.health makes the same report later."
    )
    write_threads: int = Field(
        16, ge=1, description="Ledger entries the driver writes at once after a commit (two small objects per "
        "document): on object storage each is a round trip of tens of milliseconds, so one at a time would cap a run "
        "at a few dozen documents per second."
    )


class ServeConfig(_Section):
    host: str | None = Field(
        None, description="Address the Serve HTTP proxies bind (python -m serving.app); none: 127.0.0.1 for a "
        "private local runtime, 0.0.0.0 when joining a cluster (ray.address or RAY_ADDRESS), so other machines "
        "and a Kubernetes Service can reach it."
    )
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of the Serve proxies.")
    proxy_location: Literal["EveryNode", "HeadOnly", "Disabled"] = Field(
        "EveryNode", description="Where Ray Serve runs HTTP proxies (python -m serving.app): EveryNode (every node "
        "with a replica; put a load balancer in front), HeadOnly (one proxy on the head), Disabled (handles only)."
    )
    replicas: int = Field(1, ge=1, description="Replicas of the query deployment.")
    max_query_chars: int = Field(2000, ge=1, description="Longest query accepted.")
    num_cpus: float = Field(0.5, gt=0, description="CPUs reserved per query replica (fractional on laptops).")
    max_ongoing_requests: int = Field(16, ge=1, description="Requests one replica handles at once before queueing.")
    autoscaling: bool = Field(False, description="Scale replicas between min_replicas and max_replicas (replicas is then ignored).")
    min_replicas: int = Field(1, ge=0, description="Fewest replicas when autoscaling.")
    max_replicas: int = Field(4, ge=1, description="Most replicas when autoscaling.")
    target_ongoing_requests: float = Field(4.0, gt=0, description="Ongoing requests per replica the autoscaler aims at.")
    max_batch_size: int = Field(
        16, ge=1, description="Concurrent queries a replica embeds and searches together (one model call, one "
        "Milvus call per filter); 1 turns batching off."
    )
    batch_wait_timeout_s: float = Field(
        0.0, ge=0, description="Extra wait for company when a query finds the replica idle (0: none); under load a "
        "batch is every query that arrived while the previous one ran, without waiting."
    )
    torch_threads: int = Field(
        0, ge=0, description="torch intra-op threads per replica (0: the replica's num_cpus rounded up, at least 1)."
    )
    direct_ingress: bool = Field(
        False, description="Each query replica answers HTTP on a port of its own (Ray Serve's direct ingress, "
        "RAY_SERVE_ENABLE_DIRECT_INGRESS, marked experimental in Ray 2.60), so a request skips the proxy's hop and "
        "router: ~12-16 ms p50 less per request on 2 cores (python -m jobs.benchmark serve-floor). The proxy on "
        "serve.port keeps working; python -m serving.app logs the replicas' addresses; spreading load across "
        "replicas is then a load balancer's job. Applies when this process starts Serve (python -m serving.app, the "
        "serve benchmark); a cluster's own Serve needs the variable at `ray start` on every node."
    )
    direct_ingress_ports: tuple[int, int] = Field(
        (30000, 31000), description="Lowest and highest port a replica may take for direct ingress (outside the "
        "Ray worker port range and serve.port)."
    )

    @model_validator(mode="after")
    def _ports(self) -> "ServeConfig":
        lo, hi = self.direct_ingress_ports
        if not 1 <= lo <= hi <= 65535:
            raise ValueError(f"direct_ingress_ports ({lo}, {hi}) must be two ports, lowest first")
        if self.direct_ingress and lo <= self.port <= hi:
            raise ValueError(f"serve.port {self.port} lies inside direct_ingress_ports ({lo}, {hi}): the proxy and "
                             "a replica would compete for it")
        return self
