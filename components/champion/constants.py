"""Artifact and property keys of the ChampionModel component; the parameter keys it shares with other
components are in ``components.shared.contracts``."""

from torchtfx.components.shared.contracts import CHAMPION_REGISTRY_VERSION_PROPERTY as REGISTRY_VERSION_PROPERTY

CHAMPION_KEY = "champion"
STATISTICS_KEY = "champion_statistics"  # statistics of the champion's training data (drift baseline)

SERVING_VERSION_PROPERTY = "serving_version"
SOURCE_PROPERTY = "champion_source"

__all__ = ["CHAMPION_KEY", "REGISTRY_VERSION_PROPERTY", "SERVING_VERSION_PROPERTY", "SOURCE_PROPERTY", "STATISTICS_KEY"]
