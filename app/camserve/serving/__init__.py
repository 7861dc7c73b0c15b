"""The runtime of the HTTP service: the batching worker, the request steps, the served
models, metrics, logs, the health probe and the errors a service raises."""
