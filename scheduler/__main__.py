"""``python -m scheduler`` runs the ``lahar`` command line."""

import sys

from scheduler.commands.cli import main

sys.exit(main())
