"""``python -m tests.gpu_check`` (``make gpu-check``): see tests/gpu_check/__init__.py."""

import sys

from tests.gpu_check.runner import main

sys.exit(main())
