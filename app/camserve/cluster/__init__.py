"""Running camserve on a cluster: the Ray Serve application (one camserve per replica)."""
