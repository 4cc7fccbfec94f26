"""``python -m scheduler`` runs the ``lahar`` command line."""

import sys

try:
    from scheduler.commands.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python was still starting: no traceback
    sys.exit(130)

sys.exit(main())
