"""The maps of detector families beside torchvision's (``detection_maps.py``): Ultralytics YOLO
(``yolo.py``) and query detectors such as RT-DETR and DETR (``queries.py``)."""
