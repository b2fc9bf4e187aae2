"""``python -m torchtrt_ext.cli``: the ``torchtrt-ext`` command."""
import sys

from torchtrt_ext.cli import main

sys.exit(main())
