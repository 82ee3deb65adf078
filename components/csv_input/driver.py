"""TFX's ExampleGen driver, with the window's older spans in the input fingerprint.

TFX's driver fingerprints the newest span's files alone; the local runner's cache key holds that fingerprint. A
new version of an older span in the window (or a change to its files) must be new input, or a rerun would serve
the examples written before it from the cache. Kubeflow runs TFX's own driver and never caches ExampleGen
(pipeline/kfp/compile.py: NEVER_CACHED).
"""

from __future__ import annotations

from typing import Any

from tfx.components.example_gen import driver, utils

from torchtfx.components.csv_input.properties import older_spans


class SpanWindowDriver(driver.FileBasedDriver):
    def resolve_exec_properties(self, exec_properties: dict[str, Any], pipeline_info: Any, component_info: Any):
        resolved = super().resolve_exec_properties(exec_properties, pipeline_info, component_info)
        older = older_spans(resolved)
        if older:
            lines = [f"span:{s.number},version:{s.version},{s.fingerprint}" for s in older]
            resolved[utils.FINGERPRINT_PROPERTY_NAME] = "\n".join([resolved[utils.FINGERPRINT_PROPERTY_NAME], *lines])
        return resolved
