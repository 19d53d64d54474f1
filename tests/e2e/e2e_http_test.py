"""End to end: kilnd's KServe v2 HTTP/REST port, driven with Python's standard
library (http.client) and curl, checked against the JSON shapes of the
KServe v2 REST protocol and Triton's binary tensor data, model repository,
model configuration and statistics extensions. No kiln client code is used.

kilnd processes: `main` (explicit model control, a memory limit for
RESOURCE_EXHAUSTED), `secure` (bearer token, control mode none),
`slow_loads` (a load timeout so short that a load fails with
DEADLINE_EXCEEDED), and one with TLS (HTTPS on the REST port with the gRPC
port's certificate: Python's ssl and curl verify it, plain HTTP gets no
answer).
"""

import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import unittest

KILND = "server/kilnd"

# The shipped model without batching (any number of rows), for the memory limit.
ROWS_CONFIG = """
name: "rows"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1, 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]
"""

# Requests wait up to 2 s for a batch of 8: in flight when SIGTERM comes.
SLOW_CONFIG = """
name: "slow"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
        { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
         { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { preferred_batch_size: [ 8 ] max_queue_delay_microseconds: 2000000 }
"""

MEMORY_LIMIT = 3 << 20


def make_repo(root, variants):
    """`simple` plus, per variant name, its model file with the given config."""
    os.makedirs(root, exist_ok=True)
    shutil.copytree("models/simple", os.path.join(root, "simple"), dirs_exist_ok=True)
    for name, config in variants.items():
        d = os.path.join(root, name)
        os.makedirs(os.path.join(d, "1"), exist_ok=True)
        shutil.copy("models/simple/1/model.onnx", os.path.join(d, "1", "model.onnx"))
        if config:
            with open(os.path.join(d, "config.pbtxt"), "w") as f:
                f.write(config)
    return root


class Kilnd:
    """kilnd on free 127.0.0.1 ports (read from --ready-file)."""

    def __init__(self, tmp, name, args, http_port_flag=True):
        self.ready_path = os.path.join(tmp, name + ".ready")
        self.log_path = os.path.join(tmp, name + ".log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [KILND, "--address=127.0.0.1", "--grpc-port=0", "--metrics-port=0",
             "--ready-file=" + self.ready_path] + (["--http-port=0"] if http_port_flag else []) +
            args,
            stdout=self.log, stderr=self.log)
        deadline = time.time() + 120
        self.ports = None
        while time.time() < deadline and self.ports is None:
            if self.proc.poll() is not None:
                with open(self.log_path) as f:
                    raise RuntimeError(f"kilnd {name} exited: " + f.read())
            if os.path.exists(self.ready_path):
                with open(self.ready_path) as f:
                    self.ports = {k: int(v) for k, v in
                                  (line.split("=") for line in f.read().split())}
            time.sleep(0.02)
        if self.ports is None:
            raise RuntimeError(f"kilnd {name} did not become ready")
        self.http_port = self.ports["http_port"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=60)
        self.log.close()
        return code


def call(port, method, path, body=None, headers=None, conn=None):
    """One request; returns (status, headers as a dict with lower-case names, body bytes)."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    data = r.read()
    hdrs = {k.lower(): v for k, v in r.getheaders()}
    if own:
        conn.close()
    return r.status, hdrs, data


def as_json(data):
    return json.loads(data.decode())


def floats(raw):
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def infer_body(a, b, rows, **extra):
    body = {"inputs": [
        {"name": "INPUT0", "datatype": "FP32", "shape": [rows, 16], "data": a},
        {"name": "INPUT1", "datatype": "FP32", "shape": [rows, 16], "data": b}]}
    body.update(extra)
    return body


class HttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        repo = make_repo(os.path.join(cls.tmp, "repo"),
                         {"simple2": "", "rows": ROWS_CONFIG, "slow": SLOW_CONFIG})
        cls.main = Kilnd(cls.tmp, "main", [
            "--model-repository=" + repo, "--model-control-mode=explicit",
            "--load-model=simple", "--load-model=rows", "--load-model=slow",
            f"--max-memory-bytes={MEMORY_LIMIT}", "--http-max-body-bytes=8388608"])
        cls.port = cls.main.http_port

    @classmethod
    def tearDownClass(cls):
        if cls.main.proc.poll() is None:
            cls.main.stop()

    def get(self, path, **kw):
        return call(self.port, "GET", path, **kw)

    def post(self, path, body=None, **kw):
        return call(self.port, "POST", path, body, **kw)

    def assert_error(self, reply, status, substring):
        code, hdrs, data = reply
        self.assertEqual(code, status, data)
        self.assertEqual(hdrs["content-type"], "application/json")
        body = as_json(data)
        self.assertEqual(list(body), ["error"])
        self.assertIn(substring, body["error"])

    # -- health and metadata -------------------------------------------------

    def test_health(self):
        for path in ["/v2/health/live", "/v2/health/ready", "/v2/models/simple/ready",
                     "/v2/models/simple/versions/1/ready"]:
            code, _, data = self.get(path)
            self.assertEqual((code, data), (200, b""), path)
        # A known model that is not loaded is not ready: 400, as Triton.
        self.assertEqual(self.get("/v2/models/simple2/ready")[0], 400)
        self.assert_error(self.get("/v2/models/nope/ready"), 404, "nope")
        self.assert_error(self.get("/v2/models/simple/versions/7/ready"), 404, "7")

    def test_server_metadata(self):
        code, hdrs, data = self.get("/v2")
        self.assertEqual(code, 200)
        self.assertEqual(hdrs["content-type"], "application/json")
        meta = as_json(data)
        self.assertEqual(set(meta), {"name", "version", "extensions"})
        self.assertEqual(meta["name"], "kiln")
        self.assertIsInstance(meta["version"], str)
        for e in ["binary_tensor_data", "model_repository", "statistics", "model_configuration"]:
            self.assertIn(e, meta["extensions"])

    def test_model_metadata(self):
        for path in ["/v2/models/simple", "/v2/models/simple/versions/1"]:
            code, _, data = self.get(path)
            self.assertEqual(code, 200, data)
            meta = as_json(data)
            self.assertEqual(set(meta), {"name", "versions", "platform", "inputs", "outputs"})
            self.assertEqual(meta["name"], "simple")
            self.assertEqual(meta["versions"], ["1"])
            self.assertEqual(meta["platform"], "onnxruntime_onnx")
            self.assertEqual(meta["inputs"], [
                {"name": "INPUT0", "datatype": "FP32", "shape": [-1, 16]},
                {"name": "INPUT1", "datatype": "FP32", "shape": [-1, 16]}])
            self.assertEqual([o["name"] for o in meta["outputs"]], ["OUTPUT0", "OUTPUT1"])
        self.assert_error(self.get("/v2/models/nope"), 404, "nope")
        self.assert_error(self.get("/v2/models/simple2"), 503, "simple2")

    def test_model_config(self):
        code, _, data = self.get("/v2/models/simple/config")
        self.assertEqual(code, 200, data)
        config = as_json(data)
        self.assertEqual(config["name"], "simple")
        self.assertEqual(config["max_batch_size"], 8)
        self.assertEqual(config["input"][0], {"name": "INPUT0", "data_type": "TYPE_FP32",
                                              "dims": [16]})
        self.assertEqual(config["dynamic_batching"]["max_queue_delay_microseconds"], 100)
        self.assert_error(self.get("/v2/models/nope/config"), 404, "nope")

    # -- inference -----------------------------------------------------------

    def test_infer_json(self):
        a = [i * 0.25 - 4 for i in range(32)]
        b = [0.5] * 32
        nested_b = [b[:16], b[16:]]
        code, hdrs, data = self.post("/v2/models/simple/infer",
                                     infer_body(a, nested_b, 2, id="req-7"))
        self.assertEqual(code, 200, data)
        self.assertEqual(hdrs["content-type"], "application/json")
        self.assertNotIn("inference-header-content-length", hdrs)
        resp = as_json(data)
        self.assertEqual(set(resp), {"model_name", "model_version", "id", "outputs"})
        self.assertEqual((resp["model_name"], resp["model_version"], resp["id"]),
                         ("simple", "1", "req-7"))
        out = {o["name"]: o for o in resp["outputs"]}
        self.assertEqual(set(out), {"OUTPUT0", "OUTPUT1"})
        for o in out.values():
            self.assertEqual(set(o), {"name", "datatype", "shape", "data"})
            self.assertEqual((o["datatype"], o["shape"]), ("FP32", [2, 16]))
        self.assertEqual(out["OUTPUT0"]["data"], [f32(x + y) for x, y in zip(a, b)])
        self.assertEqual(out["OUTPUT1"]["data"], [f32(max(x * y, 0.0)) for x, y in zip(a, b)])
        # Only the outputs asked for, on an explicit version.
        code, _, data = self.post("/v2/models/simple/versions/1/infer",
                                  infer_body(a[:16], b[:16], 1, outputs=[{"name": "OUTPUT1"}]))
        self.assertEqual(code, 200, data)
        self.assertEqual([o["name"] for o in as_json(data)["outputs"]], ["OUTPUT1"])

    def test_infer_binary_both_ways(self):
        a = [float(i) for i in range(16)]
        b = [-1.0] * 16
        header = json.dumps({
            "inputs": [
                {"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                 "parameters": {"binary_data_size": 64}},
                {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16], "data": b}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                        {"name": "OUTPUT1", "parameters": {"binary_data": False}}]}).encode()
        body = header + struct.pack("<16f", *a)
        code, hdrs, data = self.post(
            "/v2/models/simple/infer", body,
            headers={"Inference-Header-Content-Length": str(len(header)),
                     "Content-Type": "application/octet-stream"})
        self.assertEqual(code, 200, data)
        self.assertEqual(hdrs["content-type"], "application/octet-stream")
        n = int(hdrs["inference-header-content-length"])
        resp = json.loads(data[:n])
        o0, o1 = resp["outputs"]
        self.assertEqual(o0["name"], "OUTPUT0")
        self.assertNotIn("data", o0)
        self.assertEqual(o0["parameters"], {"binary_data_size": 64})
        self.assertEqual(len(data), n + 64)
        self.assertEqual(floats(data[n:]), [x + y for x, y in zip(a, b)])
        self.assertEqual(o1["data"], [max(x * y, 0.0) for x, y in zip(a, b)])
        # Request-level binary_data_output, both inputs binary: all outputs binary, in order.
        header = json.dumps({
            "parameters": {"binary_data_output": True},
            "inputs": [{"name": n_, "datatype": "FP32", "shape": [1, 16],
                        "parameters": {"binary_data_size": 64}} for n_ in ["INPUT0", "INPUT1"]],
        }).encode()
        body = header + struct.pack("<16f", *a) + struct.pack("<16f", *b)
        code, hdrs, data = self.post("/v2/models/simple/infer", body,
                                     headers={"Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(code, 200, data)
        n = int(hdrs["inference-header-content-length"])
        outs = json.loads(data[:n])["outputs"]
        self.assertEqual([o["parameters"]["binary_data_size"] for o in outs], [64, 64])
        self.assertEqual(floats(data[n:n + 64]), [x + y for x, y in zip(a, b)])
        self.assertEqual(floats(data[n + 64:]), [max(x * y, 0.0) for x, y in zip(a, b)])

    def test_infer_binary_with_curl(self):
        a = [float(i) for i in range(16)]
        header = json.dumps({
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 16],
                        "parameters": {"binary_data_size": 64}},
                       {"name": "INPUT1", "datatype": "FP32", "shape": [1, 16],
                        "parameters": {"binary_data_size": 64}}],
            "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
        path = os.path.join(self.tmp, "curl_body")
        with open(path, "wb") as f:
            f.write(header + struct.pack("<16f", *a) * 2)
        out = subprocess.run(
            ["curl", "-s", "-D", "-", "-o", os.path.join(self.tmp, "curl_out"),
             "-H", f"Inference-Header-Content-Length: {len(header)}",
             "-H", "Content-Type: application/octet-stream", "--data-binary", "@" + path,
             f"http://127.0.0.1:{self.port}/v2/models/simple/infer"],
            capture_output=True, check=True, text=True).stdout
        self.assertTrue(out.startswith("HTTP/1.1 200"), out)
        n = int([l.split(":")[1] for l in out.splitlines()
                 if l.lower().startswith("inference-header-content-length")][0])
        with open(os.path.join(self.tmp, "curl_out"), "rb") as f:
            data = f.read()
        self.assertEqual(json.loads(data[:n])["outputs"][0]["parameters"]["binary_data_size"], 64)
        self.assertEqual(floats(data[n:]), [2 * x for x in a])

    def test_infer_errors(self):
        one = [1.0] * 16
        infer = "/v2/models/simple/infer"
        self.assert_error(self.post("/v2/models/nope/infer", infer_body(one, one, 1)), 404,
                          "nope")
        bad_dtype = infer_body(one, one, 1)
        bad_dtype["inputs"][0]["datatype"] = "FP64"
        self.assert_error(self.post(infer, bad_dtype), 400,
                          "input 'INPUT0': datatype 'FP64' does not match the model's FP32")
        missing = infer_body(one, one, 1)
        del missing["inputs"][1]
        self.assert_error(self.post(infer, missing), 400, "missing input 'INPUT1'")
        self.assert_error(self.post(infer, infer_body(one[:15], one, 1)), 400,
                          "expected 16 values for shape [1,16], got 15")
        self.assert_error(self.post(infer, infer_body(one * 9, one * 9, 9)), 400,
                          "exceeds the model's max_batch_size 8")
        self.assert_error(self.post(infer, infer_body(one, ["x"] * 16, 1)), 400, "not a number")
        self.assert_error(self.post(infer, b"{\"inputs\": ["), 400, "malformed JSON")
        self.assert_error(self.post(infer, infer_body(one, one, 1),
                                    headers={"Inference-Header-Content-Length": "-4"}),
                          400, "Inference-Header-Content-Length")
        self.assert_error(self.post(infer, infer_body(one, one, 1,
                                                      outputs=[{"name": "NOPE"}])),
                          400, "unknown output 'NOPE'")
        # Echoed names are cut as on gRPC.
        long_name = "n" * 200000
        code, _, data = self.post(infer, {"inputs": [
            {"name": long_name, "datatype": "FP32", "shape": [1, 16], "data": one}]})
        self.assertEqual(code, 400)
        message = as_json(data)["error"]
        self.assertIn("...(200000 bytes)", message)
        self.assertLess(len(message), 1000)
        # Memory: a plan past --max-memory-bytes is RESOURCE_EXHAUSTED (429).
        rows = 16384
        header = json.dumps({"inputs": [
            {"name": n, "datatype": "FP32", "shape": [rows, 16],
             "parameters": {"binary_data_size": rows * 64}} for n in ["INPUT0", "INPUT1"]]}).encode()
        body = header + b"\0" * (rows * 64 * 2)
        self.assert_error(self.post("/v2/models/rows/infer", body,
                                    headers={"Inference-Header-Content-Length": str(len(header))}),
                          429, "memory limit")
        # kilnd serves on.
        self.assertEqual(self.post(infer, infer_body(one, one, 1))[0], 200)

    def test_http_errors(self):
        self.assert_error(self.get("/v1/models"), 404, "no such endpoint: /v1/models")
        code, hdrs, data = call(self.port, "DELETE", "/v2/models/simple")
        self.assertEqual(code, 405)
        self.assertEqual(hdrs["allow"], "GET")
        self.assert_error((code, hdrs, data), 405, "DELETE is not allowed")
        self.assert_error(self.get("/v2/models/simple/infer"), 405, "POST is")
        # A body above --http-max-body-bytes: 413 by its Content-Length, before it is sent.
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.putrequest("POST", "/v2/models/simple/infer")
        conn.putheader("Content-Length", str(9 << 20))
        conn.endheaders()
        r = conn.getresponse()
        self.assertEqual(r.status, 413)
        self.assertIn("above --http-max-body-bytes 8388608", as_json(r.read())["error"])
        conn.close()

    def test_keep_alive(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.connect()
        sock = conn.sock
        one = [1.0] * 16
        for _ in range(3):
            code, hdrs, _ = call(self.port, "POST", "/v2/models/simple/infer",
                                 infer_body(one, one, 1), conn=conn)
            self.assertEqual(code, 200)
            self.assertEqual(hdrs.get("connection", "keep-alive").lower(), "keep-alive")
            self.assertIs(conn.sock, sock)  # the same connection served all three
        conn.close()
        out = subprocess.run(["curl", "-sv", f"http://127.0.0.1:{self.port}/v2/health/live",
                              f"http://127.0.0.1:{self.port}/v2/health/ready"],
                             capture_output=True, text=True).stderr
        self.assertIn("Re-using existing connection", out)

    # -- statistics and repository -------------------------------------------

    def test_statistics(self):
        one = [1.0] * 16
        self.assertEqual(self.post("/v2/models/simple/infer", infer_body(one, one, 1))[0], 200)
        for path in ["/v2/models/simple/stats", "/v2/models/simple/versions/1/stats"]:
            code, _, data = self.get(path)
            self.assertEqual(code, 200, data)
            stats = as_json(data)
            self.assertEqual(list(stats), ["model_stats"])
            (s,) = stats["model_stats"]
            self.assertEqual((s["name"], s["version"]), ("simple", "1"))
            self.assertGreaterEqual(s["inference_count"], 1)
            self.assertGreaterEqual(s["execution_count"], 1)
            self.assertGreater(s["last_inference"], 1.6e12)  # ms since the epoch
            for k in ["success", "fail", "queue", "compute_input", "compute_infer",
                      "compute_output", "cache_hit", "cache_miss"]:
                self.assertEqual(set(s["inference_stats"][k]), {"count", "ns"}, k)
                self.assertIsInstance(s["inference_stats"][k]["ns"], int)
            self.assertGreaterEqual(s["inference_stats"]["success"]["count"], 1)
            for b in s["batch_stats"]:
                self.assertEqual(set(b), {"batch_size", "compute_input", "compute_infer",
                                          "compute_output"})
        code, _, data = self.get("/v2/models/stats")
        self.assertEqual(code, 200)
        self.assertIn("simple", [s["name"] for s in as_json(data)["model_stats"]])
        self.assert_error(self.get("/v2/models/nope/stats"), 404, "nope")

    def test_repository(self):
        code, _, data = self.post("/v2/repository/index")
        self.assertEqual(code, 200, data)
        index = as_json(data)
        self.assertIsInstance(index, list)
        by_name = {m["name"]: m for m in index}
        self.assertEqual(by_name["simple"], {"name": "simple", "version": "1", "state": "READY",
                                             "reason": ""})
        self.assertEqual(by_name["simple2"]["state"], "UNAVAILABLE")
        ready = as_json(self.post("/v2/repository/index", {"ready": True})[2])
        self.assertNotIn("simple2", [m["name"] for m in ready])
        self.assert_error(self.post("/v2/repository/index", {"ready": "yes"}), 400, "'ready'")

        one = [2.0] * 16
        code, _, data = self.post("/v2/repository/models/simple2/load")
        self.assertEqual((code, data), (200, b""))
        self.assertEqual(self.get("/v2/models/simple2/ready")[0], 200)
        code, _, data = self.post("/v2/models/simple2/infer", infer_body(one, one, 1))
        self.assertEqual(code, 200, data)
        self.assertEqual(as_json(data)["outputs"][0]["data"], [4.0] * 16)
        self.assertEqual(self.post("/v2/repository/models/simple2/unload", {})[0], 200)
        self.assertEqual(self.get("/v2/models/simple2/ready")[0], 400)
        self.assert_error(self.post("/v2/models/simple2/infer", infer_body(one, one, 1)), 503,
                          "simple2")
        self.assert_error(self.post("/v2/repository/models/nope/load"), 404, "nope")
        self.assert_error(self.post("/v2/repository/models/simple2/load",
                                    {"parameters": {"config": "{}"}}), 400,
                          "load parameters")
        self.assert_error(self.post("/v2/repository/models/simple2/load", b"[1"), 400,
                          "malformed JSON")

    def test_metrics(self):
        self.assertEqual(self.get("/v2/health/live")[0], 200)
        code, _, data = call(self.main.ports["metrics_port"], "GET", "/metrics")
        self.assertEqual(code, 200)
        text = data.decode()
        self.assertIn('kiln_http_requests_total{method="ServerLive",status="200"}', text)
        self.assertIn('kiln_http_requests_total{method="other",status="404"}', text)

    # -- last: SIGTERM drains an HTTP request in flight ----------------------

    def test_zz_shutdown_drains(self):
        a = [1.0] * 16
        result = {}

        def slow_request():
            result["reply"] = self.post("/v2/models/slow/infer", infer_body(a, a, 1))

        t = threading.Thread(target=slow_request)
        t.start()
        time.sleep(0.5)  # queued behind the 2 s batching window
        self.main.proc.send_signal(signal.SIGTERM)
        t.join(timeout=60)
        code, _, data = result["reply"]
        self.assertEqual(code, 200, data)
        self.assertEqual(as_json(data)["outputs"][0]["data"], [2.0] * 16)
        self.assertEqual(self.main.proc.wait(timeout=60), 0)


class AuthAndTlsHttpTest(unittest.TestCase):
    """The bearer token; control mode none; a load timeout; and no HTTPS."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        token = os.path.join(cls.tmp, "token")
        with open(token, "w") as f:
            f.write("s3cret\n")
        cls.repo = make_repo(os.path.join(cls.tmp, "repo"), {})
        cls.secure = Kilnd(cls.tmp, "secure", [
            "--model-repository=" + cls.repo, "--auth-token-file=" + token])
        cls.slow_loads = Kilnd(cls.tmp, "slow_loads", [
            "--model-repository=" + cls.repo, "--model-control-mode=explicit",
            "--load-timeout=0.000001"])

    @classmethod
    def tearDownClass(cls):
        assert cls.secure.stop() == 0
        assert cls.slow_loads.stop() == 0

    def authed(self, method, path, body=None, token=None):
        headers = {"Authorization": "Bearer " + token} if token else {}
        return call(self.secure.http_port, method, path, body, headers=headers)

    def test_token(self):
        # Health is open (probes), as grpc.health.v1 is.
        self.assertEqual(self.authed("GET", "/v2/health/live")[0], 200)
        self.assertEqual(self.authed("GET", "/v2/health/ready")[0], 200)
        code, hdrs, data = self.authed("GET", "/v2")
        self.assertEqual(code, 401)
        self.assertIn("Bearer", hdrs["www-authenticate"])
        self.assertIn("bearer token", as_json(data)["error"])
        self.assertEqual(self.authed("GET", "/v2", token="wrong")[0], 401)
        one = [3.0] * 16
        for path, method in [("/v2/models/simple/ready", "GET"), ("/v2/models/simple", "GET"),
                             ("/v2/models/simple/config", "GET"), ("/v2/models/stats", "GET"),
                             ("/v2/repository/index", "POST"),
                             ("/v2/repository/models/simple/unload", "POST")]:
            self.assertEqual(self.authed(method, path)[0], 401, path)
        self.assertEqual(self.authed("POST", "/v2/models/simple/infer",
                                     infer_body(one, one, 1))[0], 401)
        self.assertEqual(self.authed("GET", "/v2", token="s3cret")[0], 200)
        code, _, data = self.authed("POST", "/v2/models/simple/infer", infer_body(one, one, 1),
                                    token="s3cret")
        self.assertEqual(code, 200, data)
        self.assertEqual(as_json(data)["outputs"][0]["data"], [6.0] * 16)
        # Control mode none: repository control is FAILED_PRECONDITION (400).
        code, _, data = self.authed("POST", "/v2/repository/models/simple/load", token="s3cret")
        self.assertEqual(code, 400, data)
        self.assertIn("error", as_json(data))

    def test_load_timeout_is_504(self):
        code, _, data = call(self.slow_loads.http_port, "POST", "/v2/repository/models/simple/load")
        self.assertEqual(code, 504, data)
        self.assertIn("error", as_json(data))

    def test_https(self):
        cert, key = os.path.join(self.tmp, "cert.pem"), os.path.join(self.tmp, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=localhost",
                        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        tls = ["--model-repository=" + self.repo, "--tls-cert=" + cert, "--tls-key=" + key]
        k = Kilnd(self.tmp, "tls", tls)
        try:
            with open(k.log_path) as f:
                self.assertIn(f"serving HTTP/REST on https://127.0.0.1:{k.http_port}", f.read())
            context = ssl.create_default_context(cafile=cert)
            conn = http.client.HTTPSConnection("localhost", k.http_port, timeout=30,
                                               context=context)
            one = [1.0] * 16
            for _ in range(2):  # keep-alive over TLS: one handshake, two requests
                code, _, data = call(k.http_port, "POST", "/v2/models/simple/infer",
                                     infer_body(one, one, 1), conn=conn)
                self.assertEqual(code, 200, data)
                out = {o["name"]: o for o in as_json(data)["outputs"]}
                self.assertEqual(out["OUTPUT0"]["data"], [2.0] * 16)
            self.assertIsInstance(conn.sock, ssl.SSLSocket)
            self.assertIn(conn.sock.version(), ("TLSv1.2", "TLSv1.3"))
            conn.close()
            # curl verifies the certificate too.
            out = subprocess.run(["curl", "-s", "--cacert", cert, "-w", "%{http_code}",
                                  f"https://localhost:{k.http_port}/v2/health/ready"],
                                 capture_output=True, text=True)
            self.assertEqual(out.stdout, "200", out.stderr)
            # ...and refuses it without the CA.
            out = subprocess.run(["curl", "-s", "-o", "/dev/null",
                                  f"https://localhost:{k.http_port}/v2/health/ready"])
            self.assertNotEqual(out.returncode, 0)
            # Plain HTTP on the TLS port gets no HTTP answer.
            with socket.create_connection(("127.0.0.1", k.http_port), timeout=10) as sock:
                sock.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n")
                try:
                    reply = sock.recv(4096)
                except (ConnectionResetError, socket.timeout):
                    reply = b""
                self.assertFalse(reply.startswith(b"HTTP/1.1 200"), reply)
        finally:
            self.assertEqual(k.stop(), 0)

if __name__ == "__main__":
    unittest.main()
