"""The one configuration model of the project.

Every job reads a YAML file into :class:`Config`, then applies ``--set dotted.key=value`` overrides. Unknown keys
and bad values fail with a message naming the field. :func:`config_hash` gives a stable hash of everything that
changes the produced rows; it is recorded with every persisted row.

The model is split by what it configures: :mod:`.documents` (intake, rendering, conversion, planning),
:mod:`.index` (embedding, Milvus, retrieval), :mod:`.runtime` (Ray, output, serving); :mod:`.model` holds the root
and the loader, :mod:`.fields` the content/runtime classification behind :func:`config_hash`. Import from here.
"""

from chunker.config.base import ConfigError
from chunker.config.documents import (
    ConverterConfig,
    IntakeConfig,
    ModelConfig,
    PdfTextConfig,
    PlannerConfig,
    RenderConfig,
)
from chunker.config.fields import (
    CONTENT_FIELDS,
    RUNTIME_FIELDS,
    SECRET_FIELDS,
    config_hash,
    field_class,
    field_paths,
    runtime_settings,
)
from chunker.config.index import INDEX_TYPES, SERVER_ONLY_INDEX_TYPES, EmbedConfig, MilvusConfig, RetrievalConfig
from chunker.config.model import Config, apply_overrides, load_config
from chunker.config.runtime import OutputConfig, RayConfig, ServeConfig

__all__ = [
    "CONTENT_FIELDS", "INDEX_TYPES", "RUNTIME_FIELDS", "SECRET_FIELDS", "SERVER_ONLY_INDEX_TYPES", "Config",
    "ConfigError", "ConverterConfig", "EmbedConfig", "IntakeConfig", "MilvusConfig", "ModelConfig", "OutputConfig",
    "PdfTextConfig", "PlannerConfig", "RayConfig", "RenderConfig", "RetrievalConfig", "ServeConfig", "apply_overrides",
    "config_hash", "field_class", "field_paths", "load_config", "runtime_settings",
]
