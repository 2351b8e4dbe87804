"""``python -m dexrl``: the same command line as ``dexrl``."""

from dexrl.cli import main

main()
