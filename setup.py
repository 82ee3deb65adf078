"""torchtfx: train in PyTorch, serve through TensorFlow Extended, ONNX in between.

The top-level folders pipeline/, components/ and data/ install as ``torchtfx.pipeline``,
``torchtfx.components`` and ``torchtfx.data``, and schema/ as ``torchtfx.schema``: nothing generic lands at the
top of site-packages. ``torchtfx`` itself is an implicit namespace package (it has no folder of its own).

The curated schemas (schema/<dataset>/schema.pbtxt) and the dataset YAMLs (data/datasets/*.yaml) are package
data, read through importlib.resources (torchtfx.data.resources): a regular install (``pip install .``, a
wheel) runs from any folder without the repository.
"""

from setuptools import find_packages, setup

LAYERS = ("pipeline", "components", "data")
PACKAGES = [f"torchtfx.{name}" for name in find_packages(include=[f"{layer}*" for layer in LAYERS])]
SCHEMA_PACKAGE = "torchtfx.schema"  # schema/: data only (its __init__.py makes it a regular package)

setup(
    name="torchtfx",
    version="0.1.0",
    description="TFX pipeline with a PyTorch DDP trainer converted through ONNX to a TF SavedModel",
    python_requires=">=3.10,<3.11",
    packages=[*PACKAGES, SCHEMA_PACKAGE],
    package_dir={**{f"torchtfx.{layer}": layer for layer in LAYERS}, SCHEMA_PACKAGE: "schema"},
    package_data={"torchtfx.data": ["datasets/*.yaml"], SCHEMA_PACKAGE: ["*/schema.pbtxt"]},
    # Versions are pinned in constraints.txt; these are the direct imports of the package.
    install_requires=[
        "tfx[kfp]",
        "tensorflow",
        "tensorflow-transform",
        "tensorflow-model-analysis",
        "tensorflow-data-validation",
        "apache-beam[gcp]",
        "mlflow",
        "pydantic>=2",
        "torch",
        "onnx",
        "onnxruntime",
        "transformers",
        "tokenizers",
        "onnx2tf",
        "onnx_graphsurgeon",
        "sng4onnx",
        "click",
        "pyyaml",
    ],
    entry_points={"console_scripts": ["torchtfx=torchtfx.pipeline.cli.main:main"]},
)
