"""Files the repository ships, written again when what they show changes: the web page's sample
images (``make_samples.py`` for the shapes, ``make_photo_samples.py`` for the photos and their
NOTICE) and the screenshots of the page in the README and docs/page.md (``page_screenshots.py``)."""
