"""``python -m jiyi.cli``: the ``jiyi`` command."""

import sys

from jiyi.cli import main

sys.exit(main())
