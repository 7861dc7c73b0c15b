"""The explanation report as the server computes it: for each served classifier version, in
the background, through the batching worker's idle units, kept on disk; and drift on reload."""
