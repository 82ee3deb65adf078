"""TF Serving, as this project drives it: a library, not a TFX component (like ``components/converter``).

- ``layout``: the serving directory TF Serving watches: integer version folders, the version counter, atomic
  writes, the promotion lock;
- ``model_config``: ``models.config`` (a ``ModelServerConfig``): each model's versions and stable/canary labels;
- ``batching``: the batching settings and ``batching_parameters.txt`` (a ``BatchingParameters``);
- ``model_server``: a live server, driven through its ModelService gRPC API;
- ``transition``: the two phases (stage the versions, then move the labels) a live server accepts;
- ``errors``: what the package raises.

It imports nothing from ``pipeline/`` and nothing from ``components/promoter``: the Promoter decides what to
serve, this package serves it; ChampionModel and the command line read the same layout.
"""
