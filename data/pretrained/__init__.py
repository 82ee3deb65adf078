"""Pretrained Hugging Face checkpoints: where a checkpoint folder is (:mod:`.checkpoint`) and what its
``tokenizer.json`` says (:mod:`.tokenizer_json`). Plain Python: neither torch, transformers nor TensorFlow."""
