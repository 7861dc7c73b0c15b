"""Whole datasets explained on Ray Data into Parquet rows, and those rows exported to labeling
tools. ``from app.dataset.job import DatasetJob, explain_dataset`` runs one (it needs the
``dataset`` extra: Ray Data and pyarrow)."""
