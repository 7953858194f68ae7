"""The deploy files: KubeRay manifests against KubeRay's own CRD schemas (vendored in cluster/kuberay/crds), the rules
KubeRay and Kubernetes apply beyond the schema, the GPU demand of the job against the workers, and every command in
cluster/README.md against the current Ray CLI."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from chunker.config import Config, load_config

REPO = Path(__file__).resolve().parents[1]
KUBERAY = REPO / "cluster" / "kuberay"
README = REPO / "cluster" / "README.md"
SCHEMAS = {"RayCluster": "raycluster.v1.schema.json", "RayJob": "rayjob.v1.schema.json"}
# rayStartParams ports and the container-port names KubeRay looks them up by (ray-operator utils/constant.go):
# the head Service exposes the container ports, and the RayJob submitter finds the dashboard by the name.
KUBERAY_PORT_NAMES = {"port": "gcs-server", "dashboard-port": "dashboard", "ray-client-server-port": "client",
                      "metrics-export-port": "metrics"}
NOT_SINGLE_PORTS = {"min-worker-port", "max-worker-port", "worker-port-list"}
OBJECT_META = {"name", "generateName", "namespace", "labels", "annotations"}


def _docs() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(KUBERAY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((f"{path.name}:{doc['kind']}", doc))
    return out


DOCS = _docs()
RAY_DOCS = [(name, d) for name, d in DOCS if d["kind"] in SCHEMAS]


def _strict(node: Any) -> Any:
    """The schema with unknown fields refused where it lists its fields, as `kubectl apply` (strict field
    validation) refuses them; the CRD itself leaves that to the API server's pruning."""
    if isinstance(node, list):
        return [_strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: ({name: _strict(s) for name, s in v.items()} if k == "properties" else _strict(v)) for k, v in node.items()}
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _cluster_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]


def _groups(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec.get("workerGroupSpecs", [])]


def _gpus(group: dict[str, Any]) -> float:
    limits = group["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
    return float(limits.get("nvidia.com/gpu", 0))


# ------------------------------------------------------------------ schema


@pytest.mark.parametrize("name,doc", RAY_DOCS, ids=[n for n, _ in RAY_DOCS])
def test_manifest_matches_the_kuberay_crd_schema(name: str, doc: dict[str, Any]) -> None:
    import jsonschema

    schema = _strict(json.loads((KUBERAY / "crds" / SCHEMAS[doc["kind"]]).read_text()))
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])
    assert doc["apiVersion"] == "ray.io/v1"
    assert set(doc["metadata"]) <= OBJECT_META


def test_the_strict_schema_catches_what_kubectl_would_refuse() -> None:
    import jsonschema

    schema = _strict(json.loads((KUBERAY / "crds" / SCHEMAS["RayCluster"]).read_text()))
    doc = next(d for _, d in RAY_DOCS if d["kind"] == "RayCluster")
    bad = json.loads(json.dumps(doc))
    bad["spec"]["enableInTreeAutoscalng"] = True  # a typo KubeRay would silently drop
    bad["spec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] = 0  # rayStartParams values are strings
    messages = [e.message for e in jsonschema.Draft7Validator(schema).iter_errors(bad)]
    assert any("enableInTreeAutoscalng" in m for m in messages) and any("is not of type 'string'" in m for m in messages)


# ------------------------------------------------------------------ rules beyond the schema


@pytest.mark.parametrize("name,doc", RAY_DOCS, ids=[n for n, _ in RAY_DOCS])
def test_every_ray_start_port_is_a_named_container_port(name: str, doc: dict[str, Any]) -> None:
    for group_name, group in _groups(_cluster_spec(doc)):
        ports = {p["containerPort"]: p.get("name", "") for p in group["template"]["spec"]["containers"][0].get("ports", [])}
        for key, value in group.get("rayStartParams", {}).items():
            if not key.endswith("port") or key in NOT_SINGLE_PORTS:
                continue
            port = int(value)
            assert port in ports, f"{group_name}: rayStartParams {key}={value} has no containerPort"
            want = KUBERAY_PORT_NAMES.get(key)
            assert ports[port] == (want or ports[port]) and ports[port], (
                f"{group_name}: containerPort {port} ({key}) must be named {want!r}, is {ports[port]!r}")


@pytest.mark.parametrize("name,doc", RAY_DOCS, ids=[n for n, _ in RAY_DOCS])
def test_gpu_workers_tolerate_the_gpu_taint_and_leave_shm_to_kuberay(name: str, doc: dict[str, Any]) -> None:
    for group_name, group in _groups(_cluster_spec(doc)):
        pod = group["template"]["spec"]
        if _gpus(group):
            assert any(t.get("key") == "nvidia.com/gpu" and t.get("effect") in (None, "NoSchedule")
                       and t.get("operator") in ("Exists", "Equal") for t in pod.get("tolerations", [])), group_name
        # KubeRay mounts /dev/shm itself, a memory emptyDir as large as the Ray container's memory limit, unless the
        # container mounts something there already (ray-operator/controllers/ray/common/pod.go, addEmptyDir /
        # makeEmptyDirVolume). Ray's object store (30% of memory) and NCCL between tensor-parallel shards live
        # there: a smaller volume of our own would only shrink it.
        mounts = [m for m in pod["containers"][0].get("volumeMounts", []) if m["mountPath"] == "/dev/shm"]
        assert not mounts, f"{group_name}: /dev/shm is KubeRay's to mount (sized to the memory limit)"


def _pvcs() -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in DOCS if d["kind"] == "PersistentVolumeClaim"}


@pytest.mark.parametrize("name,doc", RAY_DOCS, ids=[n for n, _ in RAY_DOCS])
def test_weights_are_a_read_only_many_claim_mounted_read_only(name: str, doc: dict[str, Any]) -> None:
    # Every GPU pod mounts the same weights, on several nodes: a ReadWriteOnce claim attaches to one node only and
    # leaves the other pods Pending.
    pvcs = _pvcs()
    claims = 0
    for group_name, group in _groups(_cluster_spec(doc)):
        pod = group["template"]["spec"]
        for vol in pod.get("volumes", []):
            claim = vol.get("persistentVolumeClaim")
            if not claim:
                continue
            claims += 1
            assert claim["claimName"] in pvcs, f"{group_name}: claim {claim['claimName']} is not shipped in {KUBERAY}"
            assert pvcs[claim["claimName"]]["spec"]["accessModes"] == ["ReadOnlyMany"]
            assert claim.get("readOnly") is True
            mounts = [m for m in pod["containers"][0].get("volumeMounts", []) if m["name"] == vol["name"]]
            assert mounts and all(m.get("readOnly") is True for m in mounts)
    assert claims, "no weights volume"


@pytest.mark.parametrize("name,doc", RAY_DOCS, ids=[n for n, _ in RAY_DOCS])
def test_replica_bounds_mean_what_they_say(name: str, doc: dict[str, Any]) -> None:
    spec = _cluster_spec(doc)
    for group in spec.get("workerGroupSpecs", []):
        lo, hi = group["minReplicas"], group["maxReplicas"]
        assert lo <= group.get("replicas", lo) <= hi
        if lo != hi:  # without KubeRay's in-tree autoscaler, maxReplicas is never used
            assert spec.get("enableInTreeAutoscaling") is True, f"{group['groupName']}: {lo}..{hi} without autoscaling"


def _ingest_args(entrypoint: str) -> tuple[Config, dict[str, str]]:
    """The config an ingest entrypoint runs with, parsed with the job's own options (chunker.cli.base_parser)."""
    from chunker.cli import base_parser

    words = shlex.split(entrypoint)
    assert words[:3] == ["python", "-m", "jobs.ingest"], entrypoint
    p = base_parser("ingest")
    p.add_argument("--input", required=True)
    p.add_argument("--output")
    p.add_argument("--force", action="store_true")
    p.add_argument("--drivers", type=int, default=1)
    ns = p.parse_args(words[3:])
    # In the image the repository is /app (cluster/Dockerfile); here it is REPO.
    config = REPO / re.sub(r"^/app/", "", ns.config)
    cfg = load_config(config, ns.overrides + ([f"output.dir={ns.output}"] if ns.output else []))
    return cfg, {"input": ns.input, "output": ns.output or cfg.output.dir}


def _cpus(group: dict[str, Any]) -> float:
    limits = group["template"]["spec"]["containers"][0].get("resources", {}).get("limits", {})
    raw = str(limits.get("cpu", "1"))
    return float(raw[:-1]) / 1000 if raw.endswith("m") else float(raw)


def _node_types(spec: dict[str, Any]) -> list[Any] | None:
    """What KubeRay's autoscaler can add: each worker group up to ``maxReplicas`` pods (``numOfHosts`` Ray nodes
    each), or None without the in-tree autoscaler (KubeRay then keeps ``replicas`` pods)."""
    from chunker.run.cluster import NodeType

    if spec.get("enableInTreeAutoscaling") is not True:
        return None
    return [NodeType(g["groupName"], _cpus(g), _gpus(g), int(g["maxReplicas"]) * int(g.get("numOfHosts", 1)))
            for g in spec.get("workerGroupSpecs", [])]


def _placement_problems(cfg: Config, spec: dict[str, Any]) -> list[str]:
    """The job's own placement rule (chunker.run.cluster.fit_stages, what jobs.ingest runs before any actor starts)
    on this cluster: the pods there at submit time (the head and each group's ``minReplicas``: an idle autoscaled
    group may be down to it) plus what the autoscaler can add, as the job reads it (``ray.node_types`` declares
    KubeRay's groups, which the job cannot read from inside the cluster: they must be the manifest's)."""
    from chunker.run.cluster import ClusterFitError, NodeType, fit_stages

    types = _node_types(spec)
    declared = [NodeType(t.name, t.cpus, t.gpus, t.max_nodes) for t in cfg.ray.node_types]
    if declared and declared != types:
        return [f"ray.node_types {declared} is not what the manifest's autoscaler can add: {types}"]
    nodes = []
    for name, g in _groups(spec):
        n = 1 if name == "head" else (g["minReplicas"] if types is not None else g.get("replicas", g["minReplicas"]))
        head_cpus = float(g.get("rayStartParams", {}).get("num-cpus", _cpus(g))) if name == "head" else _cpus(g)
        nodes += [{"CPU": head_cpus, "GPU": _gpus(g)}] * int(n) * int(g.get("numOfHosts", 1))
    try:
        fit_stages(cfg, nodes, types)
    except ClusterFitError as exc:
        return [str(exc)]
    return []


def test_the_rayjob_fits_its_workers_and_reaches_shared_storage() -> None:
    from chunker.deploy_checks import bulk_target_problems, cluster_path_problems

    (job,) = [d for _, d in RAY_DOCS if d["kind"] == "RayJob"]
    cfg, args = _ingest_args(job["spec"]["entrypoint"])
    spec = _cluster_spec(job)
    assert _placement_problems(cfg, spec) == []
    nodes = 1 + sum(g["maxReplicas"] for g in spec["workerGroupSpecs"])
    assert cluster_path_problems(cfg, nodes) == [] and bulk_target_problems(cfg.milvus) == []
    assert args["input"].startswith("s3://")
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])["env_vars"]
    assert env["HF_HUB_OFFLINE"] == "1"


def test_placement_check_catches_an_embedder_without_a_gpu_share() -> None:
    # Two one-GPU workers, two conversion actors of one GPU each and an embedder wanting a quarter: it never
    # starts, and Ray Data waits for it silently.
    spec = {"headGroupSpec": {"rayStartParams": {"num-cpus": "0"}, "template": {"spec": {"containers": [{}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                                  "template": {"spec": {"containers": [{"resources": {"limits": {
                                      "nvidia.com/gpu": "1", "cpu": "16"}}}]}}}]}
    cfg = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml",
                      ["ray.convert_actors=2", "ray.embed_num_gpus=0.25", "embed.device=cuda"])
    [problem] = _placement_problems(cfg, spec)
    assert "embed stage cannot be placed" in problem and "0.25 GPU" in problem
    assert _placement_problems(load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml", ["ray.convert_actors=2"]), spec) == []
    with pytest.raises(Exception, match="cannot hold converter.model.tensor_parallel_size=4"):
        load_config(REPO / "configs" / "qwen2.5-vl-72b.yaml", ["ray.convert_num_gpus=2"])


def test_a_rayjob_is_submitted_again_under_a_new_name() -> None:
    # A RayJob that finished stays finished: applying the same one again changes nothing. generateName with
    # `kubectl create` makes each submission a new RayJob; the done ledger in --output makes it a resume.
    (job,) = [d for _, d in RAY_DOCS if d["kind"] == "RayJob"]
    assert "generateName" in job["metadata"] and "name" not in job["metadata"]
    text = README.read_text()
    assert "kubectl create -f cluster/kuberay/rayjob.yaml" in text
    assert "kubectl apply -f cluster/kuberay/rayjob.yaml" not in text and "re-apply" not in text.lower()


# ------------------------------------------------------------------ commands in the README


def _commands(text: str) -> list[list[str]]:
    """Shell commands of the README's code blocks (indented or fenced), continuation lines joined, leading
    VAR=value assignments dropped."""
    lines, out, buf = text.splitlines(), [], ""
    fenced = False
    for line in lines:
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        if not (fenced or line.startswith("    ")) or not line.strip():
            if buf:
                out.append(buf)
                buf = ""
            continue
        buf += line.strip().rstrip("\\") + " "
        if not line.rstrip().endswith("\\"):
            out.append(buf)
            buf = ""
    cmds = []
    for raw in out:
        words = shlex.split(raw, comments=True)
        while words and re.match(r"^[A-Z_]+=", words[0]):
            words = words[1:]
        if words:
            cmds.append(words)
    return cmds


def _leaf(group: Any, words: list[str]) -> tuple[Any, list[str]]:
    import click

    cmd, rest = group, list(words)
    while isinstance(cmd, click.Group) and rest and rest[0] in cmd.commands:
        cmd, rest = cmd.commands[rest[0]], rest[1:]
    return cmd, rest


README_CMDS = _commands(README.read_text())


def test_readme_ray_and_serve_commands_parse_with_the_installed_cli() -> None:
    from ray.dashboard.modules.dashboard_sdk import parse_runtime_env_args
    from ray.scripts.scripts import cli as ray_cli
    from ray.serve.scripts import cli as serve_cli

    seen = set()
    for words in README_CMDS:
        if words[0] not in ("ray", "serve"):
            continue
        cmd, rest = _leaf(ray_cli if words[0] == "ray" else serve_cli, words[1:])
        ctx = cmd.make_context(" ".join(words[:2]), rest)  # raises on an unknown option or a bad value
        seen.add(" ".join(words[: 3 if words[1] == "job" else 2]))
        if cmd.name == "submit":
            p = ctx.params
            # Ray refuses both at once ("Only one of --runtime_env and --runtime-env-json can be provided").
            assert not (p["runtime_env"] and p["runtime_env_json"]), words
            if p["runtime_env"]:
                env = parse_runtime_env_args(runtime_env=str(REPO / p["runtime_env"]), working_dir=p["working_dir"])
                assert "env_vars" in env
            _ingest_args(shlex.join(p["entrypoint"]))
    assert {"ray up", "ray start", "ray job submit", "serve deploy"} <= seen, seen


def test_readme_submissions_fit_the_shipped_raycluster() -> None:
    from chunker.deploy_checks import bulk_target_problems, cluster_path_problems

    (cluster,) = [d for _, d in RAY_DOCS if d["kind"] == "RayCluster"]
    submits = [w for w in README_CMDS if w[:3] == ["ray", "job", "submit"]]
    assert submits
    for words in submits:
        entry = words[words.index("--") + 1:]
        cfg, args = _ingest_args(shlex.join(entry))
        assert _placement_problems(cfg, cluster["spec"]) == [], entry
        assert cluster_path_problems(cfg, 3) == [] and bulk_target_problems(cfg.milvus) == [], entry
        assert args["output"].startswith("s3://") and args["input"].startswith("s3://")
        if "--address" in words:  # the KubeRay submission: it names the groups the job cannot read itself
            assert cfg.ray.node_types, "the KubeRay submission declares ray.node_types (the manifest's groups)"


def test_the_job_rule_accepts_the_autoscaled_group_and_refuses_what_it_can_never_hold() -> None:
    (cluster,) = [d for _, d in RAY_DOCS if d["kind"] == "RayCluster"]
    spec = cluster["spec"]
    seven = REPO / "configs" / "qwen2.5-vl-7b.yaml"
    gpu = next(g for g in spec["workerGroupSpecs"] if _gpus(g))
    most = int(gpu["maxReplicas"])
    # Every pod of the group at its maximum: accepted, though the group may be down to minReplicas at submit time.
    assert gpu["minReplicas"] < most
    assert _placement_problems(load_config(seven, [f"ray.convert_actors={most}"]), spec) == []
    [problem] = _placement_problems(load_config(seven, [f"ray.convert_actors={most + 1}"]), spec)
    assert "convert stage cannot be placed" in problem and f"can add {most} x gpu" in problem
    # Declared node types that are not the manifest's are a mismatch, not a silent wrong answer.
    wrong = load_config(seven, ["ray.node_types=[{name: gpu, cpus: 16, gpus: 2, max_nodes: 8}]"])
    [problem] = _placement_problems(wrong, spec)
    assert "is not what the manifest's autoscaler can add" in problem


def test_readme_kubectl_files_exist() -> None:
    files = [w[i + 1] for w in README_CMDS if w[:2] in (["kubectl", "apply"], ["kubectl", "create"])
             for i, a in enumerate(w[:-1]) if a == "-f"]
    assert files and all((REPO / f).is_file() for f in files), files


def test_onprem_start_commands_parse() -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config  # what `ray up` runs first
    from ray.scripts.scripts import cli as ray_cli

    onprem = yaml.safe_load((REPO / "cluster" / "onprem.yaml").read_text())
    validate_config(prepare_config(json.loads(json.dumps(onprem))))
    starts = 0
    for line in onprem["head_start_ray_commands"] + onprem["worker_start_ray_commands"]:
        for segment in line.split(";"):
            words = [w for w in shlex.split(segment) if not re.match(r"^[A-Z_]+=", w)]
            if words and Path(words[0]).name == "ray" and words[1] == "start":
                cmd, rest = _leaf(ray_cli, words[1:])
                cmd.make_context("ray start", [w.replace("$RAY_HEAD_IP", "10.0.0.10") for w in rest])
                starts += 1
    assert starts == 2


def test_serve_config_is_valid_and_reachable_from_other_machines() -> None:
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load((REPO / "configs" / "serve.yaml").read_text())
    conf = ServeDeploySchema.model_validate(raw) if hasattr(ServeDeploySchema, "model_validate") else \
        ServeDeploySchema.parse_obj(raw)
    assert conf.http_options.host == "0.0.0.0"
    assert str(getattr(conf.proxy_location, "value", conf.proxy_location)) == "EveryNode"
    for app in raw["applications"]:
        for item in app["args"].get("set", []):
            assert item.split("=", 1)[0] != "milvus.uri" or "://" in item  # replicas on many nodes: a server


def _kuberay_submission() -> list[str]:
    (words,) = [w for w in README_CMDS if w[:3] == ["ray", "job", "submit"] and "--address" in w]
    return words[words.index("--") + 1:]


def test_the_readme_prose_about_the_gpu_group_is_what_the_manifest_and_the_fit_check_say() -> None:
    # The numbers the README states in words (not in a command) are read from it, so an edit to the manifest or to
    # the README that makes them disagree fails here, and each claim is put to the job's own fit rule.
    text = " ".join(README.read_text().split())
    (cluster,) = [d for _, d in RAY_DOCS if d["kind"] == "RayCluster"]
    spec = cluster["spec"]
    gpu = next(g for g in spec["workerGroupSpecs"] if _gpus(g))
    stated = re.search(r"GPU worker group of (\d+)-(\d+) one-GPU pods \((\d+) CPUs each\)", text)
    lo, hi, cpus = map(int, stated.groups())
    assert (lo, hi, cpus, _gpus(gpu)) == (gpu["minReplicas"], gpu["maxReplicas"], _cpus(gpu), 1.0)
    assert f"group: {cpus} CPUs, 1 GPU, at most `maxReplicas` {hi} pods" in text

    cfg, _ = _ingest_args(shlex.join(_kuberay_submission()))
    assert cfg.ray.autoscale_wait_s == float(re.search(r"`ray\.autoscale_wait_s` \((\d+) s\)", text).group(1))
    assert cfg.converter.model.engine_start_wait_s == float(
        re.search(r"`converter\.model\.engine_start_wait_s` \((\d+) s\)", text).group(1))
    # "demand no group can ever hold (`ray.convert_actors=9`, or 2 GPUs per actor) is refused at once, in one line"
    actors, per_actor = re.search(r"\(`ray\.convert_actors=(\d+)`, or (\d+) GPUs per actor\) is refused", text).groups()
    assert int(actors) == hi + 1
    for extra in (f"ray.convert_actors={actors}", f"ray.convert_num_gpus={per_actor}"):
        cfg, _ = _ingest_args(shlex.join(_kuberay_submission() + ["--set", extra]))
        [problem] = _placement_problems(cfg, spec)
        assert "\n" not in problem and "convert stage cannot be placed" in problem, extra


def test_the_readme_gpu_share_for_the_embedder_fits_where_the_submissions_run() -> None:
    # The README offers `--set ray.convert_num_gpus=0.9 --set ray.embed_num_gpus=0.1 --set embed.device=cuda` for
    # the eight one-GPU workers: per device that is 0.9 + 0.1 on one GPU, which the fit check must accept on the
    # shipped RayCluster; the 0.5 share the README warns about must be refused.
    text = " ".join(README.read_text().split())
    shares = shlex.split(re.search(r"instead, add `(--set ray\.convert_num_gpus=[^`]+)`", text).group(1))
    assert "ray.embed_num_gpus=0.1" in shares
    (cluster,) = [d for _, d in RAY_DOCS if d["kind"] == "RayCluster"]
    for words in [w for w in README_CMDS if w[:3] == ["ray", "job", "submit"]]:
        entry = words[words.index("--") + 1:]
        cfg, _ = _ingest_args(shlex.join(entry + shares))
        assert cfg.ray.convert_actors == 8 and cfg.embed.device == "cuda"
        assert _placement_problems(cfg, cluster["spec"]) == [], entry
        cfg, _ = _ingest_args(shlex.join(entry + shares + ["--set", "ray.embed_num_gpus=0.5"]))
        [problem] = _placement_problems(cfg, cluster["spec"])
        assert "embed stage cannot be placed" in problem and "must fit on one GPU" in problem
