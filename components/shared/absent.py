"""The marker for an output artifact that stands for "nothing": Kubeflow Pipelines always publishes a
step's declared outputs, so an executor that has nothing to publish (ChampionModel on a first run) marks
its artifact, and ``torchtfx.pipeline.kfp.entrypoint`` drops marked artifacts from downstream inputs."""

ABSENT_PROPERTY = "torchtfx_absent"
