"""Configuration: every family (dataset, gates, trainer, batching, cluster and runner settings) is parsed
by one mechanism, :mod:`torchtfx.data.config.strict`."""
