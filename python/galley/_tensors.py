"""Turns the extension's batch buffers into torch tensors.

torch is imported here, on the first batch, never when galley is imported.
"""

from ._warn import warn_user

_DTYPES = {"uint8": "uint8", "float32": "float32"}


def _torch():
    import torch
    return torch


def images_tensor(memory):
    """A zero-copy tensor over one batch's shared-memory slot.

    The tensor keeps ``memory`` alive; the slot returns to galleyd when the
    last tensor viewing it is freed.
    """
    torch = _torch()
    dtype = getattr(torch, _DTYPES[memory.dtype])
    if memory.nbytes == 0:
        return torch.empty(tuple(memory.shape), dtype=dtype)
    return torch.frombuffer(memory, dtype=dtype).view(tuple(memory.shape))


def int64_tensor(data):
    """An int64 tensor over a bytearray of little-endian int64 values."""
    torch = _torch()
    if len(data) == 0:
        return torch.empty(0, dtype=torch.int64)
    return torch.frombuffer(data, dtype=torch.int64)


def pinning_available(pin_memory):
    """What torch.utils.data.DataLoader does with pin_memory=True: pin where
    CUDA is available, otherwise warn once and carry on unpinned."""
    if not pin_memory:
        return False
    torch = _torch()
    if torch.cuda.is_available():
        return True
    warn_user("pin_memory=True, but CUDA is not available: batches are not pinned (as with "
              "torch.utils.data.DataLoader). Pass pin_memory=False to silence this.")
    return False


def pin(tensor):
    """A copy of ``tensor`` in page-locked host memory, so that
    ``.to("cuda", non_blocking=True)`` overlaps the copy with compute. The
    shared-memory slot is released as soon as the caller drops the view.
    A batch's other fields (lists of strings, dicts) pass as they are."""
    return tensor.pin_memory() if hasattr(tensor, "pin_memory") else tensor
