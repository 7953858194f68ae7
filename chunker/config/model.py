"""The root :class:`Config` (its cross-section checks) and how a YAML file plus ``--set`` overrides become one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

# The one list of model backends lives beside their factories; the registry imports nothing of the config.
from chunker.backends.registry import known_backends
from chunker.config.base import ConfigError, _Section
from chunker.config.documents import ConverterConfig, IntakeConfig, PlannerConfig, RenderConfig
from chunker.config.index import EmbedConfig, MilvusConfig, RetrievalConfig
from chunker.config.runtime import OutputConfig, RayConfig, ServeConfig


# Backends that load the model into the process that asks for them (not a client of a served model).
_IN_PROCESS_MODELS = ("vllm", "transformers")


class Config(_Section):
    intake: IntakeConfig = Field(default_factory=IntakeConfig, description="Input discovery and page batching.")
    render: RenderConfig = Field(default_factory=RenderConfig, description="Page rendering.")
    converter: ConverterConfig = Field(default_factory=ConverterConfig, description="Page conversion to Markdown.")
    planner: PlannerConfig = Field(default_factory=PlannerConfig, description="Chunk planning over element IDs.")
    embed: EmbedConfig = Field(default_factory=EmbedConfig, description="Passage and query embedding.")
    milvus: MilvusConfig = Field(default_factory=MilvusConfig, description="Vector store.")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig, description="Query-time retrieval.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray runtime and stage sizing.")
    output: OutputConfig = Field(default_factory=OutputConfig, description="Where run artefacts go.")
    serve: ServeConfig = Field(default_factory=ServeConfig, description="Query endpoint.")

    @field_validator("converter")
    @classmethod
    def _known_backend(cls, v: ConverterConfig) -> ConverterConfig:
        known = {"pdf-text", *known_backends()}
        if v.backend not in known:
            raise ValueError(f"unknown converter backend {v.backend!r}; known: {', '.join(sorted(known))}")
        return v

    @model_validator(mode="after")
    def _engine_fits_its_gpus(self) -> "Config":
        # A tensor-parallel engine spans whole GPUs of one actor: a fraction (or fewer GPUs) can never start it.
        tp, gpus = self.converter.model.tensor_parallel_size, self.ray.convert_num_gpus
        if tp > 1 and gpus and (gpus < tp or gpus != int(gpus)):
            raise ValueError(f"ray.convert_num_gpus={gpus} cannot hold converter.model.tensor_parallel_size={tp} "
                             f"GPUs: give each conversion actor {tp} whole GPUs")
        return self

    @model_validator(mode="after")
    def _llm_planner_has_a_model(self) -> "Config":
        # Caught here, before any actor starts, rather than as a traceback from inside the planning stage.
        if self.planner.kind == "llm" and not self.planner.llm_backend and self.converter.backend == "pdf-text":
            raise ValueError("planner.kind=llm needs a model: set planner.llm_backend (vllm, openai, transformers, "
                             "scripted) or use a model converter backend")
        if self.planner.kind == "llm" and not self.planner.llm_backend and self.converter.backend in _IN_PROCESS_MODELS:
            # The planner would load a second copy of the model (a second vLLM engine) inside the planning stage,
            # which holds no GPU: the run dies there, or loads a 16 GB model on CPU. Say so before anything starts.
            raise ValueError(
                f"planner.kind=llm with converter.backend={self.converter.backend} would load a second copy of the "
                "converter's model inside the planning stage, which has no GPU; set planner.llm_backend=openai (the "
                "model served once, e.g. by vllm serve) or scripted, or name the in-process backend explicitly "
                f"(planner.llm_backend={self.converter.backend}) where the planner runs on a GPU host (jobs.rechunk)")
        return self

    @model_validator(mode="after")
    def _segment_timeout_is_the_last_resort(self) -> "Config":
        budget = self.segment_model_budget_s()
        if budget is None:
            return self
        if "document_timeout_s" not in self.ray.model_fields_set:
            self.ray.document_timeout_s = max(self.ray.document_timeout_s or 0.0, 2 * budget)
        elif self.ray.document_timeout_s is not None and self.ray.document_timeout_s < budget:
            pages = self.intake.segment_pages + self.intake.segment_overlap_pages
            raise ValueError(
                f"ray.document_timeout_s={self.ray.document_timeout_s:g} would fire before the batch timeouts of a "
                f"{pages}-page segment ({pages} x converter.page_timeout_s={self.converter.page_timeout_s:g} = "
                f"{budget:g} s) and fail the whole segment: raise it to at least {budget:g}, lower "
                "converter.page_timeout_s, or set ray.document_timeout_s=null")
        return self

    def segment_model_budget_s(self) -> float | None:
        """Model time the longest segment may take, batch timeouts included; None without a model converter or
        without a batch timeout."""
        if self.converter.backend == "pdf-text" or not self.converter.page_timeout_s:
            return None
        return (self.intake.segment_pages + self.intake.segment_overlap_pages) * self.converter.page_timeout_s


def _format_error(err: ValidationError, origin: str) -> str:
    lines = [f"invalid configuration ({origin}):"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def _parse_scalar(raw: str) -> Any:
    # YAML gives the natural reading of "4", "0.5", "true", "null", "[a, b]".
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides to a raw config mapping (validated afterwards)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like dotted.key=value")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override {item!r} has an empty key")
        node = data
        for p in parts[:-1]:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
            node = child
        node[parts[-1]] = _parse_scalar(raw)
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read YAML (or defaults when path is None), apply overrides, validate."""
    data: dict[str, Any] = {}
    origin = "defaults"
    if path is not None:
        p = Path(path)
        origin = str(p)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data = loaded
    data = apply_overrides(data, list(overrides or []))
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, origin)) from None
