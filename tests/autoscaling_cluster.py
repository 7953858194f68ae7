"""A real Ray autoscaler on this machine: a head started with an autoscaling config for Ray's fake multi-node
provider, which adds worker "nodes" (raylets on this host) when demand asks for them.

``ray.cluster_utils.AutoscalingCluster`` does the same, but both its ``start()`` and ``shutdown()`` run
``ray stop --force``, which ends every Ray process on the machine (other test runs included), and its config comes
from an ``example.yaml`` the wheel does not ship. So the head is started here with the config written inline (the
shape of that example: provider ``fake_multinode``, no updaters, no launch-config check, empty command lists), on
free ports and a temp dir of its own, and stopped by ending exactly the processes that name that temp dir.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VENV_BIN = REPO / ".venv" / "bin" if (REPO / ".venv" / "bin" / "ray").exists() else Path(sys.executable).parent


@dataclass
class RunningCluster:
    address: str  # host:port of the GCS, for RAY_ADDRESS / ray.init
    temp: str  # the cluster's temp dir: every process of it names it on its command line
    env: dict[str, str]  # the environment the head (and so every node and worker) was started with


def free_ports(n: int, start: int = 24400) -> list[int]:
    """Free ports outside Ray's worker range (10002-19999), away from the defaults other runs use."""
    out: list[int] = []
    for port in range(start, 29999):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(port)
        if len(out) == n:
            return out
    raise RuntimeError("no free ports")


def autoscaling_config(gcs_port: int, head: dict[str, float], workers: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An autoscaling config for the fake multi-node provider (the launcher's schema; node types as in any config)."""
    return {
        "cluster_name": "fake-autoscaling", "max_workers": sum(w.get("max_workers", 0) for w in workers.values()),
        "upscaling_speed": 1.0, "idle_timeout_minutes": 5,
        "docker": {}, "auth": {}, "file_mounts": {}, "cluster_synced_files": [],
        "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
        # gcs_address: the provider's worker nodes join the GCS at 6379 unless told otherwise
        "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                     "disable_launch_config_check": True, "gcs_address": f"127.0.0.1:{gcs_port}"},
        "head_node_type": "ray.head.default",
        "available_node_types": {"ray.head.default": {"resources": head, "node_config": {}, "max_workers": 0},
                                 **workers},
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [], "worker_setup_commands": [],
        "head_start_ray_commands": [], "worker_start_ray_commands": [],
    }


@contextmanager
def autoscaling_cluster(workers: dict[str, dict[str, Any]], head_cpus: int = 2,
                        env: dict[str, str] | None = None, hide_config: bool = False) -> Iterator[RunningCluster]:
    """Start the head (``head_cpus`` CPUs, no GPU) with ``workers`` node types; stop all of it afterwards.

    ``hide_config``: once the autoscaler has read its config, move the file away, so a job on the head cannot read
    the node types (KubeRay's case: its autoscaler reads the RayCluster from a sidecar). The running autoscaler keeps
    the config it read (ray/autoscaler/_private/autoscaler.py, ``reset(errors_fatal=False)`` logs a config it cannot
    read again and goes on with the last one)."""
    gcs, dash, client, agent, agent_grpc, rtenv, metrics = free_ports(7)
    temp = tempfile.mkdtemp(prefix="rayas", dir="/tmp")  # short: Ray's socket paths have a length limit
    config = Path(temp) / "autoscaling.json"
    config.write_text(json.dumps(autoscaling_config(gcs, {"CPU": head_cpus}, workers)))
    full = dict(os.environ)
    full.update(env or {})
    full.update(AUTOSCALER_UPDATE_INTERVAL_S="1", RAY_FAKE_CLUSTER="1", RAY_AUTH_MODE="disabled",
                PATH=f"{VENV_BIN}:{full.get('PATH', '')}")
    full.pop("RAY_ADDRESS", None)
    cmd = [str(VENV_BIN / "ray"), "start", "--head", f"--autoscaling-config={config}", "--node-ip-address=127.0.0.1",
           f"--port={gcs}", f"--dashboard-port={dash}", "--include-dashboard=false",
           f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
           f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={rtenv}",
           f"--metrics-export-port={metrics}", f"--temp-dir={temp}", f"--num-cpus={head_cpus}", "--num-gpus=0",
           "--disable-usage-stats"]
    try:
        subprocess.run(cmd, env=full, check=True, capture_output=True, timeout=180)
        if hide_config:
            _hide_after_first_read(gcs, temp, config, full)
        yield RunningCluster(f"127.0.0.1:{gcs}", temp, full)
    finally:
        stop_processes_naming(temp)


def _hide_after_first_read(gcs: int, temp: str, config: Path, env: dict[str, str]) -> None:
    """Wait until the autoscaler reports its node types (it has read the config), then move the config away."""
    probe = ("import json, sys, time, ray; from ray.experimental.internal_kv import _internal_kv_get; "
             "ray.init(address=sys.argv[1], log_to_driver=False, logging_level='ERROR'); t = time.time()\n"
             "while time.time() - t < 120:\n"
             "    s = json.loads(_internal_kv_get('__autoscaling_status') or b'{}')\n"
             "    if (s.get('autoscaler_report') or {}).get('node_type_mapping'): break\n"
             "    time.sleep(0.5)")
    subprocess.run([str(VENV_BIN / "python"), "-c", probe, f"127.0.0.1:{gcs}"], env=env, check=True,
                   capture_output=True, timeout=180)
    config.rename(Path(temp) / "autoscaling.hidden")


def stop_processes_naming(temp: str) -> None:
    """End the processes whose command line names ``temp`` (this cluster's only: never a blanket ``ray stop``)."""

    def pids() -> list[int]:
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                if temp.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
        return found

    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + 10
        while pids() and time.time() < deadline:
            time.sleep(0.2)
