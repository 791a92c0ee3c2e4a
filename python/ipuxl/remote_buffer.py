"""Remote buffers, mirroring ``popxl.remote_buffer``. Not implemented yet."""

__all__ = ["RemoteBuffer", "remote_buffer"]


class RemoteBuffer:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("popxl.RemoteBuffer (remote memory) is not implemented yet in ipuxl")


def remote_buffer(*args, **kwargs):
    raise NotImplementedError("popxl.remote_buffer (remote memory) is not implemented yet in ipuxl")
