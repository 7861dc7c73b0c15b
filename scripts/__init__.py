"""Tools for people who work on camserve, run by hand from the repository root; README.md here
says which folder holds what. The tests' own infrastructure lives in ``tests/harness``."""
