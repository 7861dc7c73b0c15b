"""camserve's lab: the scene generators, the demo models' training and the studies behind
docs/quality.md, and the commands ``camserve eval``, ``train-demo`` and ``train-dense``.

The server never imports this package, and its wheel does not carry it: ``pip install ./lab``
from camserve's repository adds it beside an installed camserve (``make test`` installs it
editable).
"""
