"""``python -m app`` is the ``camserve`` command."""

from app.cli import main

main()
