"""``python -m gpu_dedup.cli``: the ``gpu-dedup`` command."""
import sys

from .main import main

sys.exit(main())
