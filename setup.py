"""torchtfx: train in PyTorch, serve through TensorFlow Extended, ONNX in between."""

from setuptools import find_packages, setup

setup(
    name="torchtfx",
    version="0.1.0",
    description="TFX pipeline with a PyTorch DDP trainer converted through ONNX to a TF SavedModel",
    python_requires=">=3.10,<3.11",
    packages=find_packages(include=["pipeline", "pipeline.*", "components", "components.*", "data", "data.*"]),
    package_data={"data": ["datasets/*.yaml", "fixtures/*"]},
    # Versions are pinned in constraints.txt; these are the direct imports of the package.
    install_requires=[
        "tfx[kfp]",
        "tensorflow",
        "tensorflow-transform",
        "tensorflow-model-analysis",
        "tensorflow-data-validation",
        "apache-beam[gcp]",
        "mlflow",
        "torch",
        "onnx",
        "onnxruntime",
        "onnx2tf",
        "onnx_graphsurgeon",
        "sng4onnx",
        "click",
        "pyyaml",
    ],
    entry_points={"console_scripts": ["torchtfx=pipeline.cli:main"]},
)
