"""`python -m memlane.cli ...`, as the `memlane` entry point."""

import sys

from . import main

sys.exit(main())
