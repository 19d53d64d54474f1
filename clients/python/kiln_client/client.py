"""KilnClient: a small synchronous client over the generated gRPC stubs."""

import grpc
import numpy as np

from kiln_client.proto import grpc_service_pb2 as pb
from kiln_client.proto import grpc_service_pb2_grpc as pb_grpc
from kiln_client.proto import health_pb2
from kiln_client.proto import health_pb2_grpc
from kiln_client.shm import ShmTensor

# KServe datatype <-> numpy dtype (little-endian).
DATATYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}


def _datatype_of(array):
    for name, dtype in DATATYPES.items():
        if array.dtype == dtype:
            return name
    raise ValueError(f"numpy dtype {array.dtype} has no KServe datatype")


class InferError(Exception):
    """A failed call: `code` is the grpc.StatusCode, `message` the server's text."""

    def __init__(self, code, message):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class KilnClient:
    """Talks to kilnd (or any KServe v2 / Triton gRPC server).

    url: host:port. token: bearer token (metadata authorization). tls: use
    TLS, with ca_cert (PEM bytes or path) as roots. timeout: seconds per call.
    """

    def __init__(self, url="localhost:8001", token=None, tls=False, ca_cert=None,
                 timeout=60.0, max_message_bytes=256 << 20):
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        if tls:
            roots = ca_cert
            if isinstance(ca_cert, str):
                with open(ca_cert, "rb") as f:
                    roots = f.read()
            self._channel = grpc.secure_channel(
                url, grpc.ssl_channel_credentials(root_certificates=roots), options)
        else:
            self._channel = grpc.insecure_channel(url, options)
        self._stub = pb_grpc.GRPCInferenceServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else None
        self._timeout = timeout

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        try:
            return method(request, timeout=self._timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise InferError(e.code(), e.details()) from None

    # ---- health and metadata ----
    def live(self):
        return self._call(self._stub.ServerLive, pb.ServerLiveRequest()).live

    def ready(self):
        return self._call(self._stub.ServerReady, pb.ServerReadyRequest()).ready

    def model_ready(self, name, version=""):
        return self._call(self._stub.ModelReady,
                          pb.ModelReadyRequest(name=name, version=version)).ready

    def health(self, service=""):
        resp = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def server_metadata(self):
        return self._call(self._stub.ServerMetadata, pb.ServerMetadataRequest())

    def model_metadata(self, name, version=""):
        return self._call(self._stub.ModelMetadata,
                          pb.ModelMetadataRequest(name=name, version=version))

    def model_config(self, name, version=""):
        return self._call(self._stub.ModelConfig,
                          pb.ModelConfigRequest(name=name, version=version)).config

    def statistics(self, name="", version=""):
        return self._call(self._stub.ModelStatistics,
                          pb.ModelStatisticsRequest(name=name, version=version))

    # ---- repository ----
    def index(self, ready_only=False):
        resp = self._call(self._stub.RepositoryIndex, pb.RepositoryIndexRequest(ready=ready_only))
        return [(m.name, m.version, m.state, m.reason) for m in resp.models]

    def load(self, name):
        self._call(self._stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name=name))

    def unload(self, name):
        self._call(self._stub.RepositoryModelUnload,
                   pb.RepositoryModelUnloadRequest(model_name=name))

    # ---- system shared memory (kilnd --shm-allow; see kiln_client.shm) ----
    def register_system_shared_memory(self, name, key, byte_size, offset=0):
        self._call(self._stub.SystemSharedMemoryRegister,
                   pb.SystemSharedMemoryRegisterRequest(name=name, key=key, offset=offset,
                                                        byte_size=byte_size))

    def unregister_system_shared_memory(self, name=""):
        """Unregisters region `name`, or every region when it is empty."""
        self._call(self._stub.SystemSharedMemoryUnregister,
                   pb.SystemSharedMemoryUnregisterRequest(name=name))

    def system_shared_memory_status(self, name=""):
        """{region name: {"key", "offset", "byte_size"}} of one or every region."""
        resp = self._call(self._stub.SystemSharedMemoryStatus,
                          pb.SystemSharedMemoryStatusRequest(name=name))
        return {n: {"key": r.key, "offset": r.offset, "byte_size": r.byte_size}
                for n, r in resp.regions.items()}

    # ---- inference ----
    def infer(self, model, inputs, outputs=None, version="", request_id="", priority=0,
              timeout_us=0):
        """Runs `model` on {name: numpy array or ShmTensor}; returns {output
        name: numpy array}.

        outputs: None (all), a list of names, or {name: None or ShmTensor}; an
        output given a ShmTensor (SharedMemoryRegion.slice) is written to that
        slice and returned as a numpy view of it.
        """
        req = pb.ModelInferRequest(model_name=model, model_version=version, id=request_id)
        if priority:
            req.parameters["priority"].int64_param = priority
        if timeout_us:
            req.parameters["timeout"].int64_param = timeout_us
        for name, value in inputs.items():
            if isinstance(value, ShmTensor):
                tensor = req.inputs.add(name=name, datatype=value.datatype,
                                        shape=list(value.shape))
                value.set_parameters(tensor.parameters)  # no raw entry, as Triton's clients
                continue
            array = np.ascontiguousarray(value)
            datatype = _datatype_of(array)
            tensor = req.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
            del tensor  # only metadata; the data travels raw
            req.raw_input_contents.append(array.astype(DATATYPES[datatype], copy=False).tobytes())
        in_shm = outputs if isinstance(outputs, dict) else {}
        for name in outputs or []:
            out = req.outputs.add(name=name)
            if in_shm.get(name) is not None:
                in_shm[name].set_parameters(out.parameters)
        resp = self._call(self._stub.ModelInfer, req)
        return self._decode(resp, in_shm)

    @staticmethod
    def _decode(resp, in_shm=None):
        result = {}
        for i, out in enumerate(resp.outputs):
            dtype = DATATYPES.get(out.datatype)
            if dtype is None:
                raise ValueError(f"output {out.name}: unsupported datatype {out.datatype}")
            slot = (in_shm or {}).get(out.name)
            if slot is not None and "shared_memory_region" in out.parameters:
                result[out.name] = slot.region.array(dtype, tuple(out.shape), slot.offset)
                continue
            if resp.raw_output_contents:
                data = np.frombuffer(resp.raw_output_contents[i], dtype=dtype)
            else:
                field = {"FP32": "fp32_contents", "FP64": "fp64_contents",
                         "INT64": "int64_contents", "UINT64": "uint64_contents",
                         "BOOL": "bool_contents"}.get(out.datatype)
                if field is None:
                    field = "uint_contents" if out.datatype.startswith("UINT") else "int_contents"
                data = np.array(getattr(out.contents, field), dtype=dtype)
            result[out.name] = data.reshape(tuple(out.shape))
        return result
