"""What every configuration section shares: unknown keys and bad assignments fail, naming the field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from chunker.errors import SetupError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ConfigError(SetupError, ValueError):
    """A configuration file or override is wrong; the message names the field."""
