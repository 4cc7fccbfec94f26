"""The read-only web view of the scheduler: pages and JSON fed by a view published per cycle.

:mod:`.view` builds the picture of a closed session, :mod:`.publish` is the loop's hook that
keeps it, :mod:`.pages` renders HTML, :mod:`.server` serves it (``lahar run --web-address``)
and :mod:`.htmlfile` writes it as one file (``lahar simulate --html``).
"""
