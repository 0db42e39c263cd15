"""``python -m declrag.cli``: the `declrag` command."""

import sys

from . import main

sys.exit(main())
