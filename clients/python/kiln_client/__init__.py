"""kiln's Python client: KServe v2 / Triton gRPC inference with numpy arrays.

    from kiln_client import KilnClient
    client = KilnClient("localhost:8001")
    outputs = client.infer("simple", {"INPUT0": a, "INPUT1": b})

System shared memory (kilnd --shm-allow): kiln_client.shm.SharedMemoryRegion.

The gRPC stubs (kiln_client.proto) are generated from proto/*.proto by the
build: `bazel build //clients/python:kiln_client`, then put both
clients/python and bazel-bin/clients/python on PYTHONPATH (Debian's python3-grpcio and
python3-protobuf provide the runtime).
"""

import pkgutil

# The generated kiln_client/proto may live in another sys.path entry
# (bazel-bin/clients/python) than these sources (clients/python).
__path__ = pkgutil.extend_path(__path__, __name__)

from kiln_client.client import KilnClient, InferError, DATATYPES  # noqa: E402
from kiln_client.shm import SharedMemoryRegion, ShmTensor  # noqa: E402

__all__ = ["KilnClient", "InferError", "DATATYPES", "SharedMemoryRegion", "ShmTensor"]
