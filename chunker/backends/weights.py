"""Where a model backend finds its weights, without touching the network unless the user allowed it."""

from __future__ import annotations

from pathlib import Path

from chunker.backends.base import BackendUnavailable
from chunker.config import ModelConfig


def _has_weights(folder: Path) -> bool:
    # A cache snapshot can hold config.json alone (someone fetched only the config): that is not a usable model.
    patterns = ("*.safetensors", "*.bin", "*.safetensors.index.json")
    return (folder / "config.json").is_file() and any(next(folder.glob(p), None) is not None for p in patterns)


def cached_snapshot(repo_id: str, cache_dir: str | None = None) -> Path | None:
    """The local Hugging Face cache snapshot of ``repo_id`` holding weights, or None. Never goes online."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        return None
    try:
        folder = Path(snapshot_download(repo_id=repo_id, local_files_only=True, cache_dir=cache_dir))
    except Exception:  # not cached, malformed id, ...: all mean "not here"
        return None
    return folder if _has_weights(folder) else None


def resolve_model_dir(cfg: ModelConfig) -> str:
    """The local directory (or, with ``allow_download``, the hub id) a backend should load.

    Order: ``cfg.path``; ``cfg.name`` when it is a local directory; the HF cache snapshot of ``cfg.name``;
    the bare hub id only when ``cfg.allow_download`` is set. Anything else fails with what to do.
    """
    if cfg.path:
        folder = Path(cfg.path).expanduser()
        if not folder.is_dir():
            raise BackendUnavailable(f"converter.model.path {cfg.path!r} is not a directory")
        if not (folder / "config.json").is_file():
            raise BackendUnavailable(f"converter.model.path {cfg.path!r} holds no config.json: not a model directory")
        return str(folder)
    as_path = Path(cfg.name).expanduser()
    if as_path.is_dir():
        return str(as_path)
    snapshot = cached_snapshot(cfg.name)
    if snapshot is not None:
        return str(snapshot)
    if cfg.allow_download:
        return cfg.name
    raise BackendUnavailable(
        f"model {cfg.name!r} is not available locally (no converter.model.path, not a directory, not in the "
        f"Hugging Face cache) and downloads are off. Fetch it first (hf download {cfg.name} --local-dir DIR, "
        f"huggingface_hub's command) and set converter.model.path=DIR, or set converter.model.allow_download=true"
    )
