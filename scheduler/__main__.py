"""``python -m scheduler`` runs the ``lahar`` command line."""

import sys

from scheduler.cli import main

sys.exit(main())
