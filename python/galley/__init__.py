"""galley: training batches prepared once per node, served to every job.

    import galley
    from galley import transforms as T
    loader = galley.DataLoader("/data/imagenet/train", batch_size=256,
                               transform=T.Compose([T.RandomResizedCrop(224),
                                                    T.RandomHorizontalFlip()]))
    for images, labels in loader:
        ...

Importing galley does not import torch: ``galley.query()`` and the other
admin calls work in an environment without it. The loader imports torch when
it yields its first batch.
"""

from . import _native

_galley = _native.load()

from . import transforms  # noqa: E402
from ._galley import (AccessDenied, DatasetNotFound, EndOfStream, GalleyError,  # noqa: E402
                      InvalidRequest, JobCancelled, ProtocolError, ResourceLimit, SampleError,
                      ServerUnavailable, Timeout, default_socket_path)
from .loader import DataLoader  # noqa: E402

__version__ = _galley.__version__
# The wire protocol this client speaks; galleyd reports its own in
# query("status")["protocol_version"], and the handshake refuses a mismatch.
protocol_version = _galley.protocol_version


def query(what="status", socket=None):
    """A daemon-wide document: "status", "datasets", "jobs", "cache" or "plan".

    ``socket`` defaults to ``$GALLEY_SOCKET``, then the user's runtime
    directory, then the system socket (see ``default_socket_path()``).
    """
    return _galley.Client(socket or "").query(what)


__all__ = [
    "DataLoader", "transforms", "query", "default_socket_path", "GalleyError",
    "ServerUnavailable", "InvalidRequest", "DatasetNotFound", "AccessDenied", "ResourceLimit",
    "Timeout", "SampleError", "JobCancelled", "ProtocolError", "EndOfStream", "__version__",
    "protocol_version",
]
