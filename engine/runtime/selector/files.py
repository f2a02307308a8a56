"""An adapter folder's file names and the error that names a bad one: the bottom of the selector
package, which both the adapter loader and the GGUF writers import."""

from __future__ import annotations

from engine.core.errors import ModelLoadError

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


class SelectorError(ModelLoadError):
    """An adapter that cannot be found or loaded; the message names the folder and the fix."""
