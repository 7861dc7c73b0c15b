"""One adapter per kind of model (classifier, detector, segmenter) behind one interface
(``interface.TaskAdapter``): how a model of that kind loads, which request options it takes,
how its batches run on the worker and what its answers carry. The worker, the routes, the
labeling tools, the dataset runs and the commands ask the adapter (``lookup``) instead of
asking which kind of model they hold."""
