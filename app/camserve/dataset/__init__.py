"""Whole datasets explained into Parquet rows (a small one in this process, a large one on Ray
Data), and those rows exported to labeling tools. ``from camserve.dataset.job import DatasetJob,
explain_dataset`` runs one (it needs the ``dataset`` extra: pyarrow, and Ray Data for a job
that runs on Ray)."""
