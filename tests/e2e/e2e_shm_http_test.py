"""End to end, issue 14.2: Triton's system shared-memory extension on kilnd's
HTTP/REST port, driven with Python's standard library only
(multiprocessing.shared_memory for the POSIX shm objects, http.client for
the requests) against the JSON shapes of Triton's protocol.

kilnd processes: `shm` (--shm-allow=/kiln_rest_, a `slow` model that holds a
lone request 1.5 s) and `off` (no --shm-allow: shared memory disabled).
"""

import os
import secrets
import struct
import tempfile
import threading
import time
import unittest
from multiprocessing import shared_memory

from e2e_http_test import Kilnd, as_json, call, make_repo

SLOW_CONFIG = """
name: "slow"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 1500000 }
"""

ROWS = 2
N = ROWS * 16
NBYTES = N * 4
A = [float(i) - 8.0 for i in range(N)]
B = [0.5 * (i % 5) - 1.0 for i in range(N)]


def new_object(what, size=4096, prefix="kiln_rest_"):
    """A new POSIX shm object "/<prefix><what>_<pid>_<random>" (the caller
    unlinks it; the random part keeps runs in a PID namespace apart)."""
    name = f"{prefix}{what}_{os.getpid()}_{secrets.token_hex(4)}"
    return shared_memory.SharedMemory(name=name, create=True, size=size)


def key_of(shm):
    return "/" + shm.name


def floats(buf, offset, n=N):
    return list(struct.unpack_from(f"<{n}f", buf, offset))


def shm_params(region, size, offset=None):
    p = {"shared_memory_region": region, "shared_memory_byte_size": size}
    if offset is not None:
        p["shared_memory_offset"] = offset
    return p


def infer_body(inputs_in_shm, outputs=None):
    """INPUT0 / INPUT1 of A / B, as JSON data or (inputs_in_shm) at 0 and
    NBYTES of region "io"."""
    inputs = []
    for k, (name, values) in enumerate((("INPUT0", A), ("INPUT1", B))):
        t = {"name": name, "datatype": "FP32", "shape": [ROWS, 16]}
        if inputs_in_shm:
            t["parameters"] = shm_params("io", NBYTES, k * NBYTES)
        else:
            t["data"] = values
        inputs.append(t)
    body = {"inputs": inputs}
    if outputs is not None:
        body["outputs"] = outputs
    return body


class ShmHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        repo = make_repo(os.path.join(cls.tmp, "repo"), {"slow": SLOW_CONFIG})
        cls.kilnd = Kilnd(cls.tmp, "shm", ["--model-repository=" + repo, "--exit-timeout=5",
                                           "--shm-allow=/kiln_rest_"])
        cls.port = cls.kilnd.http_port

    @classmethod
    def tearDownClass(cls):
        code = cls.kilnd.stop()
        if code != 0:
            raise RuntimeError(f"kilnd exited with {code}")

    def setUp(self):
        self.objects = []

    def tearDown(self):
        call(self.port, "POST", "/v2/systemsharedmemory/unregister")
        for shm in self.objects:
            shm.close()
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def region(self, name, what, size=4096):
        """A new object registered (whole) as region `name`."""
        shm = new_object(what, size)
        self.objects.append(shm)
        status, _, body = call(self.port, "POST", f"/v2/systemsharedmemory/region/{name}/register",
                               {"key": key_of(shm), "offset": 0, "byte_size": size})
        self.assertEqual(status, 200, body)
        return shm

    def test_register_status_unregister(self):
        status, _, body = call(self.port, "GET", "/v2")
        self.assertIn("system_shared_memory", as_json(body)["extensions"])
        shm = new_object("status", 8192)
        self.objects.append(shm)
        ok = call(self.port, "POST", "/v2/systemsharedmemory/region/a/register",
                  {"key": key_of(shm), "offset": 4000, "byte_size": 100})
        self.assertEqual(ok[0], 200, ok[2])
        ok = call(self.port, "POST", "/v2/systemsharedmemory/region/b/register",
                  {"key": key_of(shm), "byte_size": 8192})  # offset defaults to 0
        self.assertEqual(ok[0], 200, ok[2])
        status, _, body = call(self.port, "GET", "/v2/systemsharedmemory/status")
        self.assertEqual(status, 200)
        self.assertEqual(as_json(body), [
            {"name": "a", "key": key_of(shm), "offset": 4000, "byte_size": 100},
            {"name": "b", "key": key_of(shm), "offset": 0, "byte_size": 8192}])
        for method in ("GET", "POST"):
            status, _, body = call(self.port, method, "/v2/systemsharedmemory/region/b/status")
            self.assertEqual(status, 200)
            self.assertEqual([r["name"] for r in as_json(body)], ["b"])
        status, _, body = call(self.port, "GET", "/v2/systemsharedmemory/region/zz/status")
        self.assertEqual(status, 404)
        self.assertIn("zz", as_json(body)["error"])
        status, _, body = call(self.port, "POST", "/v2/systemsharedmemory/region/a/register",
                               {"key": key_of(shm), "byte_size": 8})
        self.assertEqual(status, 409, body)
        self.assertEqual(call(self.port, "POST",
                              "/v2/systemsharedmemory/region/a/unregister")[0], 200)
        self.assertEqual(call(self.port, "POST",
                              "/v2/systemsharedmemory/region/a/unregister")[0], 404)
        self.assertEqual(call(self.port, "POST", "/v2/systemsharedmemory/unregister")[0], 200)
        status, _, body = call(self.port, "GET", "/v2/systemsharedmemory/status")
        self.assertEqual(as_json(body), [])
        # Wrong methods and paths.
        self.assertEqual(call(self.port, "GET", "/v2/systemsharedmemory/unregister")[0], 405)
        self.assertEqual(call(self.port, "POST", "/v2/systemsharedmemory/register")[0], 404)

    def test_registration_errors(self):
        shm = new_object("reg")
        self.objects.append(shm)
        path = "/v2/systemsharedmemory/region/r/register"
        cases = [
            ({"key": key_of(shm), "byte_size": 4097}, 400, "past the end"),
            ({"key": key_of(shm), "offset": 2 ** 64 - 8, "byte_size": 16}, 400, "overflows"),
            ({"key": key_of(shm), "byte_size": -1}, 400, "byte_size"),
            ({"key": "kiln_rest_x", "byte_size": 16}, 400, "must start with '/'"),
            ({"key": "/kiln_rest_a/b", "byte_size": 16}, 400, "'/'"),
            ({"byte_size": 16}, 400, "'key'"),
            ({"key": f"/kiln_rest_absent_{os.getpid()}", "byte_size": 16}, 404, "cannot open"),
        ]
        for body, want, text in cases:
            status, _, out = call(self.port, "POST", path, body)
            self.assertEqual(status, want, (body, out))
            self.assertIn(text, as_json(out)["error"], body)
        status, _, out = call(self.port, "POST", path, b"{not json")
        self.assertEqual(status, 400)
        denied = new_object("denied", prefix="kiln_other_")
        self.objects.append(denied)
        status, _, out = call(self.port, "POST", path, {"key": key_of(denied), "byte_size": 16})
        self.assertEqual(status, 403, out)
        self.assertIn("not allowed", as_json(out)["error"])

    def test_infer_through_shared_memory_matches_inline(self):
        status, _, body = call(self.port, "POST", "/v2/models/simple/infer", infer_body(False))
        self.assertEqual(status, 200, body)
        inline = {o["name"]: o["data"] for o in as_json(body)["outputs"]}
        shm = self.region("io", "io")
        struct.pack_into(f"<{N}f", shm.buf, 0, *A)
        struct.pack_into(f"<{N}f", shm.buf, NBYTES, *B)
        outputs = [{"name": "OUTPUT0", "parameters": shm_params("io", 512, 1024)},
                   {"name": "OUTPUT1", "parameters": shm_params("io", 512, 2048)}]
        status, _, body = call(self.port, "POST", "/v2/models/simple/infer",
                               infer_body(True, outputs))
        self.assertEqual(status, 200, body)
        resp = as_json(body)
        for out, offset in zip(resp["outputs"], (1024, 2048)):
            self.assertNotIn("data", out)
            self.assertEqual(out["shape"], [ROWS, 16])
            self.assertEqual(out["parameters"], shm_params("io", 512, offset))
            self.assertEqual(floats(shm.buf, offset), inline[out["name"]])
        # One input from the region, one as JSON; one output each way.
        body = infer_body(False, [{"name": "OUTPUT0"},
                                  {"name": "OUTPUT1", "parameters": shm_params("io", 512, 3072)}])
        body["inputs"][1] = {"name": "INPUT1", "datatype": "FP32", "shape": [ROWS, 16],
                             "parameters": shm_params("io", NBYTES, NBYTES)}
        status, _, out = call(self.port, "POST", "/v2/models/simple/infer", body)
        self.assertEqual(status, 200, out)
        self.assertEqual(as_json(out)["outputs"][0]["data"], inline["OUTPUT0"])
        self.assertEqual(floats(shm.buf, 3072), inline["OUTPUT1"])

    def test_bad_references(self):
        self.region("io", "bad")

        def infer(body):
            status, _, out = call(self.port, "POST", "/v2/models/simple/infer", body)
            return status, as_json(out).get("error", "")

        body = infer_body(True)
        body["inputs"][0]["parameters"]["shared_memory_offset"] = 4000
        status, err = infer(body)
        self.assertEqual(status, 400)
        self.assertIn("outside region 'io'", err)
        body = infer_body(True)
        body["inputs"][1]["parameters"]["shared_memory_byte_size"] = NBYTES + 4
        status, err = infer(body)
        self.assertEqual(status, 400)
        self.assertIn("input 'INPUT1': shared_memory_byte_size", err)
        status, err = infer(infer_body(True, [{"name": "OUTPUT1",
                                               "parameters": shm_params("io", 16, 1024)}]))
        self.assertEqual(status, 400)
        self.assertIn("output 'OUTPUT1' has 128 bytes", err)
        status, err = infer(infer_body(True, [{"name": "OUTPUT0",
                                               "parameters": shm_params("nope", 512)}]))
        self.assertEqual(status, 404)
        self.assertIn("no shared-memory region 'nope'", err)
        body = infer_body(True)
        body["inputs"][0]["data"] = A
        status, err = infer(body)
        self.assertEqual(status, 400)
        self.assertIn("shared memory", err)
        body = infer_body(True)
        del body["inputs"][0]["parameters"]["shared_memory_byte_size"]
        status, err = infer(body)
        self.assertEqual(status, 400)
        self.assertIn("needs both", err)
        self.assertEqual(call(self.port, "POST", "/v2/models/simple/infer",
                              infer_body(False))[0], 200)

    def test_unregister_while_a_request_is_in_flight(self):
        shm = self.region("io", "flight")
        struct.pack_into(f"<{N}f", shm.buf, 0, *A)
        struct.pack_into(f"<{N}f", shm.buf, NBYTES, *B)
        outputs = [{"name": "OUTPUT0", "parameters": shm_params("io", 512, 1024)}]
        result = {}

        def run():
            result["r"] = call(self.port, "POST", "/v2/models/slow/infer",
                               infer_body(True, outputs))

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.4)  # queued in `slow` for 1.5 s
        status, _, body = call(self.port, "POST", "/v2/systemsharedmemory/region/io/unregister")
        self.assertEqual(status, 200, body)
        shm.unlink()  # the object is gone; only the mappings are left
        t.join(timeout=30)
        status, _, body = result["r"]
        self.assertEqual(status, 200, body)
        self.assertEqual(floats(shm.buf, 1024), [a + b for a, b in zip(A, B)])
        self.assertTrue(self.kilnd.proc.poll() is None)
        self.assertEqual(call(self.port, "POST", "/v2/models/simple/infer",
                              infer_body(False))[0], 200)


class ShmOffHttpTest(unittest.TestCase):
    def test_shared_memory_is_off_by_default(self):
        tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        kilnd = Kilnd(tmp, "off", ["--model-repository=" + make_repo(os.path.join(tmp, "repo"),
                                                                     {})])
        shm = new_object("off")
        try:
            port = kilnd.http_port
            status, _, body = call(port, "GET", "/v2")
            self.assertNotIn("system_shared_memory", as_json(body)["extensions"])
            status, _, body = call(port, "POST", "/v2/systemsharedmemory/region/io/register",
                                   {"key": key_of(shm), "byte_size": 4096})
            self.assertEqual(status, 400, body)
            self.assertIn("--shm-allow", as_json(body)["error"])
            status, _, body = call(port, "GET", "/v2/systemsharedmemory/status")
            self.assertEqual((status, as_json(body)), (200, []))
            status, _, body = call(port, "POST", "/v2/models/simple/infer", infer_body(True))
            self.assertEqual(status, 400, body)
            self.assertIn("disabled", as_json(body)["error"])
        finally:
            shm.close()
            shm.unlink()
            self.assertEqual(kilnd.stop(), 0)


if __name__ == "__main__":
    unittest.main()
