"""``make gpu-check``: the GPU paths no CI machine runs (issue #44), checked on a machine with NVIDIA GPUs.

One line per item, ``PASS``, ``FAIL`` or ``SKIP <item>: <reason>``: AMP + GradScaler DDP training (nccl) of the zoo
MLP and of a text model, one rank and two where two GPUs exist; the FP16 serving variant's drift gate (TF-TRT where
TensorRT loads, the float16 network on the GPU) and the MoE routing flip rate; the served SavedModel on the GPU
against the CPU; ``torchtfx run --device cuda`` end to end. Each item runs in a process of its own (TensorFlow and
torch each take the GPU's memory for themselves; a hung item is killed at its timeout). A machine without a usable
GPU skips every item, naming torch's reason or TensorFlow's empty device list, and the script exits 0; it exits 1
when an item failed. Not part of ``make test`` or ``.ci/run``.
"""
