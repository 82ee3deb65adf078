"""torchtfx's ONNX -> TensorFlow converter: a library of its own.

It takes an ONNX graph (any producer) to a TF ``tf.Module`` / SavedModel by ONNX's operator semantics, repairs
what exporters leave in graphs, and proves the result against onnxruntime. It imports nothing from the rest of
torchtfx (the pipeline, the components' TFX code, MLflow): ``tests/unit/test_import_graph.py`` holds that.

Entry points: ``torchtfx convert model.onnx OUT_DIR`` (:mod:`.savedmodel`), ``make conformance``
(:mod:`.conformance`, ONNX's own backend tests), :class:`.translator.OnnxGraphModule`.
"""
