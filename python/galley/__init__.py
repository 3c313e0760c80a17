"""galley: training batches prepared once per node, served to every job.

    import galley
    from galley import transforms as T
    loader = galley.DataLoader("/data/imagenet/train", batch_size=256, shuffle=True,
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
                      ServerUnavailable, Timeout, default_socket_path, system_socket_path,
                      user_socket_path)
from .loader import DataLoader, FixedAttributeError  # noqa: E402
from .s3_access import S3CredentialProcessError, S3CredentialsNotFound  # noqa: E402

__version__ = _galley.__version__
# The wire protocol this client speaks; galleyd reports its own in
# query("status")["protocol_version"], and the handshake refuses a mismatch.
protocol_version = _galley.protocol_version
# The sampling policies a loader may name (policy=...), in galleyd's order;
# docs/sampling.md says what each does.
sampling_policies = tuple(name for name, random in _galley.sampling_policies.items() if random)


def query(what="status", socket=None, autostart=None):
    """A daemon-wide document: "status", "datasets", "jobs", "cache" or "plan".

    The daemon is found as the loader finds it: ``socket`` or
    ``$GALLEY_SOCKET``; else the user's own daemon, then the node's service;
    else one is started for the user unless ``autostart=False`` or
    ``GALLEY_AUTOSTART=0`` (docs/autostart.md).
    """
    from . import _autostart
    return _autostart.client(socket, autostart).query(what)


__all__ = [
    "DataLoader", "FixedAttributeError", "transforms", "query", "default_socket_path",
    "user_socket_path", "system_socket_path", "GalleyError",
    "ServerUnavailable", "InvalidRequest", "DatasetNotFound", "AccessDenied", "ResourceLimit",
    "Timeout", "SampleError", "JobCancelled", "ProtocolError", "EndOfStream", "__version__",
    "protocol_version", "sampling_policies", "S3CredentialsNotFound", "S3CredentialProcessError",
]
