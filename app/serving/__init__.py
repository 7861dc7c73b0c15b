"""The runtime of the HTTP service: the batching worker, the request steps, the served
models, metrics, logs, the health probe, the errors a service raises, and the Ray Serve
application that runs it on a cluster."""
