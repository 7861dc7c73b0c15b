"""``python -m app`` is the ``camserve`` command."""

from app.entry import main

main()
