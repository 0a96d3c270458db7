"""``python -m whimbrel.cli``: the same as the ``whimbrel`` command."""

from whimbrel.cli import main

main()
