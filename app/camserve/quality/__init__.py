"""Explanation quality as camserve measures it: localisation and faithfulness metrics, labelled
samples, the explanation report of ``camserve audit`` (``audit/``) and the same report as the
server computes it (``served/``). The scenes with known answers, the demo models' training and
the studies are the lab's (``camserve_lab``, ``lab/`` in the repository)."""
