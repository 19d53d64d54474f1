"""End to end: the Python client (clients/python) against a real kilnd."""

import os
import secrets
import subprocess
import sys
import tempfile
import time
import unittest

import grpc
import numpy as np

from kiln_client import InferError, KilnClient, SharedMemoryRegion


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        ready = os.path.join(cls.tmp, "ready")
        cls.log = open(os.path.join(cls.tmp, "kilnd.log"), "w")
        cls.proc = subprocess.Popen(
            ["server/kilnd", "--model-repository=models", "--address=127.0.0.1",
             "--grpc-port=0", "--metrics-port=0", "--http-port=-1",
             "--shm-allow=/kiln_py_", "--ready-file=" + ready],
            stdout=cls.log, stderr=cls.log)
        deadline = time.time() + 120
        port = None
        while time.time() < deadline and port is None:
            if cls.proc.poll() is not None:
                raise RuntimeError("kilnd exited: " + open(cls.log.name).read())
            if os.path.exists(ready):
                fields = dict(line.split("=") for line in open(ready).read().split())
                port = fields.get("grpc_port")
            time.sleep(0.02)
        cls.client = KilnClient(f"127.0.0.1:{port}", timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.proc.terminate()
        code = cls.proc.wait(timeout=30)
        cls.log.close()
        if code != 0:
            raise RuntimeError(f"kilnd exited with {code} after SIGTERM")

    def test_health_and_metadata(self):
        self.assertTrue(self.client.live())
        self.assertTrue(self.client.ready())
        self.assertEqual(self.client.health(), "SERVING")
        self.assertTrue(self.client.model_ready("simple"))
        meta = self.client.model_metadata("simple")
        self.assertEqual([t.name for t in meta.inputs], ["INPUT0", "INPUT1"])
        self.assertEqual(list(meta.inputs[0].shape), [-1, 16])
        self.assertEqual(self.client.model_config("simple").max_batch_size, 8)
        self.assertIn(("simple", "1", "READY", ""), self.client.index())

    def test_infer(self):
        a = np.linspace(-4, 4, 48, dtype=np.float32).reshape(3, 16)
        b = np.full((3, 16), 0.5, dtype=np.float32)
        out = self.client.infer("simple", {"INPUT0": a, "INPUT1": b})
        np.testing.assert_array_equal(out["OUTPUT0"], a + b)
        np.testing.assert_array_equal(out["OUTPUT1"], np.maximum(a * b, 0))
        only = self.client.infer("simple", {"INPUT0": a, "INPUT1": b}, outputs=["OUTPUT1"])
        self.assertEqual(list(only), ["OUTPUT1"])
        stats = self.client.statistics("simple").model_stats[0]
        self.assertGreaterEqual(stats.inference_stats.success.count, 2)

    def test_errors(self):
        a = np.zeros((1, 16), dtype=np.float32)
        with self.assertRaises(InferError) as e:
            self.client.infer("nope", {"INPUT0": a, "INPUT1": a})
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(InferError) as e:
            self.client.infer("simple", {"INPUT0": a.astype(np.float64), "INPUT1": a})
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(InferError) as e:
            self.client.infer("simple", {"INPUT0": a})
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("missing input 'INPUT1'", e.exception.message)

    def test_shared_memory(self):
        a = np.linspace(-4, 4, 32, dtype=np.float32).reshape(2, 16)
        b = np.full((2, 16), 0.5, dtype=np.float32)
        key = f"/kiln_py_{os.getpid()}_{secrets.token_hex(4)}"
        with SharedMemoryRegion("py_io", 4096, key=key) as shm:
            self.client.register_system_shared_memory(shm.name, shm.key, shm.byte_size)
            self.assertEqual(self.client.system_shared_memory_status(),
                             {"py_io": {"key": shm.key, "offset": 0, "byte_size": 4096}})
            x = shm.write(a)
            y = shm.write(b, offset=128)
            out = self.client.infer("simple", {"INPUT0": x, "INPUT1": y},
                                    outputs={"OUTPUT0": shm.slice(128, offset=256),
                                             "OUTPUT1": None})
            np.testing.assert_array_equal(out["OUTPUT0"], a + b)
            np.testing.assert_array_equal(out["OUTPUT1"], np.maximum(a * b, 0))
            np.testing.assert_array_equal(shm.array(np.float32, (2, 16), 256), a + b)
            # A mix: INPUT1 inline, INPUT0 from the region.
            out = self.client.infer("simple", {"INPUT0": x, "INPUT1": b})
            np.testing.assert_array_equal(out["OUTPUT0"], a + b)

            with self.assertRaises(InferError) as e:  # the output does not fit
                self.client.infer("simple", {"INPUT0": x, "INPUT1": y},
                                  outputs={"OUTPUT0": shm.slice(64, offset=256)})
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("output 'OUTPUT0'", e.exception.message)
            with self.assertRaises(InferError) as e:
                self.client.register_system_shared_memory("py_io", shm.key, 16)
            self.assertEqual(e.exception.code, grpc.StatusCode.ALREADY_EXISTS)

            self.client.unregister_system_shared_memory("py_io")
            self.assertEqual(self.client.system_shared_memory_status(), {})
            with self.assertRaises(InferError) as e:
                self.client.infer("simple", {"INPUT0": x, "INPUT1": y})
            self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        key = f"/kiln_other_{os.getpid()}_{secrets.token_hex(4)}"
        with SharedMemoryRegion("other", 4096, key=key) as other:
            with self.assertRaises(InferError) as e:
                self.client.register_system_shared_memory(other.name, other.key, 4096)
            self.assertEqual(e.exception.code, grpc.StatusCode.PERMISSION_DENIED)


if __name__ == "__main__":
    unittest.main()
