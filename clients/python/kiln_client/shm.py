"""System shared memory (Triton's extension) for the Python client.

    from kiln_client import KilnClient, SharedMemoryRegion
    client = KilnClient("localhost:8001")
    with SharedMemoryRegion("io", 4096, key="/kiln_io") as shm:  # kilnd --shm-allow=/kiln_
        client.register_system_shared_memory(shm.name, shm.key, shm.byte_size)
        a = shm.write(np.ones((1, 16), np.float32))            # bytes 0..64
        b = shm.write(np.ones((1, 16), np.float32), offset=64)
        out = client.infer("simple", {"INPUT0": a, "INPUT1": b},
                           outputs={"OUTPUT0": shm.slice(64, offset=128)})
        out["OUTPUT0"]  # a numpy view of bytes 128..192 of the region
        client.unregister_system_shared_memory(shm.name)

A region is a POSIX shared-memory object (multiprocessing.shared_memory,
i.e. shm_open + mmap) that this process creates and, on close(), unlinks.
"""

import os
from multiprocessing import shared_memory

import numpy as np


class ShmTensor:
    """A slice [offset, offset + byte_size) of a region, as an input (with
    shape and datatype) or as room for an output (shape / datatype unset)."""

    def __init__(self, region, offset, byte_size, shape=None, datatype=None):
        self.region = region
        self.offset = offset
        self.byte_size = byte_size
        self.shape = shape
        self.datatype = datatype

    def set_parameters(self, parameters):
        """Fills a protobuf map<string, InferParameter> with the three
        shared-memory parameters."""
        parameters["shared_memory_region"].string_param = self.region.name
        parameters["shared_memory_byte_size"].int64_param = self.byte_size
        if self.offset:
            parameters["shared_memory_offset"].int64_param = self.offset

    def json_parameters(self):
        """The same parameters for a REST request."""
        p = {"shared_memory_region": self.region.name,
             "shared_memory_byte_size": self.byte_size}
        if self.offset:
            p["shared_memory_offset"] = self.offset
        return p


class SharedMemoryRegion:
    """Creates the POSIX shm object `key` ("/name", default
    /kiln_<name>_<pid>) of `byte_size` bytes; `name` is the region name to
    register it under."""

    def __init__(self, name, byte_size, key=None):
        if key is None:
            key = f"/kiln_{name}_{os.getpid()}"
        if not key.startswith("/") or "/" in key[1:]:
            raise ValueError(f"shared-memory key {key!r} must be '/name'")
        self.name = name
        self.key = key
        self.byte_size = byte_size
        self._shm = shared_memory.SharedMemory(name=key[1:], create=True, size=byte_size)

    @property
    def buffer(self):
        """The region's bytes (a memoryview)."""
        return self._shm.buf[:self.byte_size]

    def array(self, dtype, shape, offset=0):
        """A numpy array of `dtype` and `shape` over the region's bytes at
        `offset` (no copy)."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        if offset < 0 or offset + count * dtype.itemsize > self.byte_size:
            raise ValueError(f"{count} x {dtype} at offset {offset} do not fit "
                             f"region {self.name!r} ({self.byte_size} bytes)")
        return np.ndarray(tuple(shape), dtype=dtype, buffer=self._shm.buf, offset=offset)

    def write(self, array, offset=0):
        """Copies `array` into the region at `offset`; returns the ShmTensor
        to pass as an input."""
        from kiln_client.client import DATATYPES, _datatype_of  # noqa: avoid a cycle
        array = np.ascontiguousarray(array)
        datatype = _datatype_of(array)
        view = self.array(DATATYPES[datatype], array.shape, offset)
        view[...] = array
        return ShmTensor(self, offset, array.nbytes, list(array.shape), datatype)

    def slice(self, byte_size, offset=0):
        """Room for an output: bytes [offset, offset + byte_size)."""
        if offset < 0 or byte_size < 0 or offset + byte_size > self.byte_size:
            raise ValueError(f"[{offset}, {offset + byte_size}) is outside region "
                             f"{self.name!r} ({self.byte_size} bytes)")
        return ShmTensor(self, offset, byte_size)

    def close(self):
        """Unmaps (once no numpy view is left) and unlinks the object."""
        try:
            self._shm.close()
        except BufferError:
            pass  # numpy views still use the mapping; it goes with them
        try:
            self._shm.unlink()
        except FileNotFoundError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
