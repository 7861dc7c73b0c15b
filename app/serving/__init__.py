"""Ways to run the service beyond one process: a Ray Serve application."""
