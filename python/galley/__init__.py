"""galley: training batches prepared once per node, served to every job.

    import galley
    from galley import transforms as T
    loader = galley.DataLoader("/data/imagenet/train", batch_size=256,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    for images, labels in loader:
        ...
"""

from . import transforms
from ._galley import (AccessDenied, DatasetNotFound, EndOfStream, GalleyError, InvalidRequest,
                      JobCancelled, ProtocolError, ResourceLimit, SampleError, ServerUnavailable,
                      Timeout, default_socket_path)
from .loader import DataLoader


def query(what="status", socket=None):
    """A daemon-wide document: "status", "datasets", "jobs", "cache" or "plan"."""
    from ._galley import Client
    return Client(socket or "").query(what)


__all__ = [
    "DataLoader", "transforms", "query", "default_socket_path", "GalleyError",
    "ServerUnavailable", "InvalidRequest", "DatasetNotFound", "AccessDenied", "ResourceLimit",
    "Timeout", "SampleError", "JobCancelled", "ProtocolError", "EndOfStream",
]
__version__ = "0.1.0"
