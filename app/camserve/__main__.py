"""``python -m camserve`` is the ``camserve`` command."""

from camserve.entry import main

main()
