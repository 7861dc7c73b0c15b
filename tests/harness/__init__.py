"""What the tests stand on besides themselves: servers, clusters and third-party programs that
run for real, started and stopped for the tests (and reused by the benchmarks and scripts).

- ``live_server.py``: a server in a child process on a free loopback port (camserve, or any
  command that takes the port), polled until it is ready and stopped by its PID;
- ``ray_cluster.py``: a local Ray cluster of several nodes on 127.0.0.1;
- ``cam_peers.py``: pytorch-grad-cam's class for each camserve method, the peer that the parity
  tests, the benchmarks and the pointing study compare camserve with;
- ``fiftyone_env.py``, ``fiftyone_driver.py`` and ``fetch_libssl11.sh``: a real FiftyOne in its
  own environment (``.venv-fiftyone``) with its mongod, for the FiftyOne tests;
- ``labelstudio_e2e.py`` with ``labelstudio_servers.py``, ``labelstudio_client.py``,
  ``labelstudio_checks.py``, ``labelstudio_dataset.py`` and ``labelstudio_detection.py``: camserve
  as the ML backend of a real Label Studio, end to end (``make labelstudio-e2e``, and
  ``tests/integration/test_labelstudio_e2e.py``).

The ``test_*.py`` files here test the harness itself. ``app`` never imports from here; mypy holds
this package to ``--strict`` like ``app`` and ``scripts``.
"""
