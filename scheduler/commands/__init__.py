"""Every ``lahar`` subcommand: ``cli`` builds the parser; ``simulate``, ``report``,
``inspect``, ``inspect_devices``, ``replay`` and ``device`` serve their subcommands."""
