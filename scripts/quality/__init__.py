"""The studies and tables behind docs/quality.md: the pointing game on real-photo composites
(``pointing_study.py``, its pictures ``pointing_overlays.py``) and on the shape detector and
segmenter (``dense_pointing_study.py``), top-1 of the default model on the sample photos
(``photo_top1_table.py``), and the numbers of camserve's parity with pytorch-grad-cam
(``token_parity_table.py``, ``dense_parity_table.py``)."""
