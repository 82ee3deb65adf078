"""Artifact and property keys of the ChampionModel component; the parameter keys it shares with other
components are in ``components.shared.contracts``."""

CHAMPION_KEY = "champion"
STATISTICS_KEY = "champion_statistics"  # statistics of the champion's training data (drift baseline)

SERVING_VERSION_PROPERTY = "serving_version"
REGISTRY_VERSION_PROPERTY = "registry_version"
SOURCE_PROPERTY = "champion_source"
