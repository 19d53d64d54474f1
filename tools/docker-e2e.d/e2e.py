import json, os, subprocess, sys, threading, time, urllib.parse, urllib.request
import numpy as np
from kiln_client import KilnClient
from kiln_client.client import InferError

def rnd(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

def simple_inputs(seed):
    r = np.random.default_rng(seed)
    return {"INPUT0": r.standard_normal((1, 16)).astype(np.float32),
            "INPUT1": r.standard_normal((1, 16)).astype(np.float32)}

def simple_ok(inp, out):
    a, b = inp["INPUT0"], inp["INPUT1"]
    return (np.array_equal(out["OUTPUT0"], a + b)
            and np.allclose(out["OUTPUT1"], np.maximum(a * b, 0), rtol=1e-6, atol=0))

def det_ok(x, out):
    (y,) = out.values()
    return y.shape == (x.shape[0], 1, x.shape[2], x.shape[3]) and y.dtype == np.float32 \
        and np.isfinite(y).all() and 0 <= y.min() and y.max() <= 1

def cmd_inputs(d):
    """Writes the .npy inputs of the CLI checks into d."""
    for k, v in simple_inputs(1).items():
        np.save(os.path.join(d, f"simple_{k}.npy"), v)
    np.save(os.path.join(d, "det.npy"), rnd((1, 3, 640, 640), 2))
    np.save(os.path.join(d, "cls.npy"), rnd((1, 3, 48, 192), 3))
    np.save(os.path.join(d, "rec.npy"), rnd((1, 3, 48, 320), 4))

def cmd_check_cli(d):
    """Checks what `kiln infer --output-dir` wrote for each model."""
    def outs(m):
        files = sorted(f for f in os.listdir(os.path.join(d, "out_" + m)) if f.endswith(".npy"))
        return {f[:-4]: np.load(os.path.join(d, "out_" + m, f)) for f in files}
    inp = {k: np.load(os.path.join(d, f"simple_{k}.npy")) for k in ("INPUT0", "INPUT1")}
    s = outs("simple")
    assert simple_ok(inp, s), f"simple outputs wrong: {s}"
    det = outs("ocr_det")
    assert det_ok(np.load(os.path.join(d, "det.npy")), det), {k: (v.shape, v.dtype) for k, v in det.items()}
    (cls,) = outs("ocr_cls").values()
    assert cls.shape == (1, 2) and cls.dtype == np.float32 and abs(cls.sum() - 1) < 1e-4, (cls.shape, cls)
    (rec,) = outs("ocr_rec").values()
    assert rec.shape == (1, 40, 6625) and rec.dtype == np.float32, rec.shape
    assert np.allclose(rec.sum(axis=-1), 1, atol=1e-3), "rec rows are not distributions"
    print(f"simple exact; ocr_det {det_shape(det)} in [0,1]; ocr_cls {cls.shape} sums to 1; ocr_rec {rec.shape} softmax rows")

def det_shape(o):
    return next(iter(o.values())).shape

def cmd_python(url):
    """The Python client: health, index, metadata, exact `simple` results, det."""
    c = KilnClient(url, timeout=120)
    assert c.live() and c.ready(), "not live / ready"
    assert c.health() == "SERVING", c.health()
    idx = {m[0]: m[2] for m in c.index()}
    assert all(idx.get(m) == "READY" for m in ("simple", "ocr_det", "ocr_rec", "ocr_cls")), idx
    md = c.model_metadata("ocr_det")
    assert md.inputs[0].datatype == "FP32", md
    for seed in range(20):
        inp = simple_inputs(100 + seed)
        assert simple_ok(inp, c.infer("simple", inp)), f"simple wrong for seed {seed}"
    x = rnd((1, 3, 640, 640), 5)
    assert det_ok(x, c.infer("ocr_det", {"x": x})), "det output wrong"
    st = c.statistics("ocr_det")
    n = st.model_stats[0].inference_stats.success.count
    assert n >= 1, st
    print(f"index {idx}; 20 exact simple results; det ok; ModelStatistics ocr_det success={n}")

def cmd_wait_first(url, t0, timeout):
    """Seconds from t0 (epoch) to the first successful `simple` inference."""
    c = KilnClient(url, timeout=5)
    inp = simple_inputs(7)
    deadline = float(t0) + float(timeout)
    last = None
    while time.time() < deadline:
        try:
            if simple_ok(inp, c.infer("simple", inp)):
                print(f"{time.time() - float(t0):.2f}")
                return
        except InferError as e:
            last = e
        time.sleep(0.05)
    sys.exit(f"no answer within {timeout} s (last error: {last})")

def cmd_first(url, model, shape):
    """Latency of the first and second request of `shape` (ms), as JSON."""
    c = KilnClient(url, timeout=600)
    dims = tuple(int(v) for v in shape.split("x"))
    x = rnd(dims, 9)
    times = []
    for _ in range(3):
        t = time.perf_counter()
        out = c.infer(model, {"x": x})
        times.append((time.perf_counter() - t) * 1e3)
        if model == "ocr_det":
            assert det_ok(x, out)
    print(json.dumps({"first_ms": round(times[0], 1), "second_ms": round(times[1], 1), "third_ms": round(times[2], 1)}))

def cmd_fmt_first(js, new_objects, compile_s):
    d = json.loads(js)
    print(f"{d['first_ms']:.0f} ms (then {d['second_ms']:.0f}, {d['third_ms']:.0f} ms); "
          f"kernel objects compiled by clang: {new_objects}; "
          f"kiln_kernel_compile_seconds_total {float(compile_s):.2f} s")

def cmd_fmt_load(path):
    d = json.loads(next(l for l in open(path) if l.startswith("{")))
    print(f"{d['in_flight_at_stop']} in flight at the stop -> {d['in_flight_answered_ok']} answered ok; "
          f"of {d['sent_after_stop']} sent later {d['sent_after_stop_ok']} ok (until "
          f"+{d['last_ok_sent_after_stop_s']} s), {d['sent_after_stop_unavailable']} refused (UNAVAILABLE), "
          f"{d['sent_after_stop_cancelled']} cancelled at the port close; "
          f"{d['lost']} lost; stop took {d['stop_seconds']} s")

def cmd_metric(metrics_url, name, *label_filters):
    """Sum of the samples of `name` whose labels contain every filter."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    total, n = 0.0, 0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if all(f in line for f in label_filters):
                total += float(line.rsplit(" ", 1)[1]); n += 1
    print(f"{total:g}" if n else "missing")

def cmd_metrics(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    names = {l.split("{")[0].split(" ")[0] for l in text.splitlines() if l.startswith("kiln_")}
    need = ["kiln_inference_requests_success_total", "kiln_inferences_total", "kiln_executions_total",
            "kiln_request_duration_seconds_bucket", "kiln_rpc_requests_total", "kiln_model_ready",
            "kiln_estimated_flops_total", "kiln_kernels_compiled_total", "kiln_jit_captures_total",
            "kiln_device_memory_allocated_bytes"]
    missing = [n for n in need if n not in names]
    assert not missing, f"missing series: {missing}"
    counts = {}
    for line in text.splitlines():
        if line.startswith("kiln_inference_requests_success_total{"):
            model = line.split('model="')[1].split('"')[0]
            counts[model] = counts.get(model, 0) + float(line.rsplit(" ", 1)[1])
    for m in ("simple", "ocr_det", "ocr_cls", "ocr_rec"):
        assert counts.get(m, 0) > 0, f"no successful requests counted for {m}: {counts}"
    print(f"{len(names)} kiln_* series; success counts {counts}")

def cmd_load(url, det_threads, simple_threads, warm_s, *stop_cmd):
    """Keeps requests in flight, runs stop_cmd, classifies every request.

    A request is in flight at the stop when it was sent before stop_cmd
    started and answered after. Those must succeed with correct outputs
    (sent less than 50 ms before: also UNAVAILABLE, the refusal of a request
    that reached kilnd after SIGTERM). Requests sent later may be refused
    with UNAVAILABLE, or with CANCELLED when the request was still arriving
    as gRPC closed the port (its Shutdown cancels the calls it received but
    never started; README.md documents both codes). Anything else
    (INTERNAL / RST_STREAM, a CANCELLED request sent before the stop, a
    wrong answer) is a lost request."""
    results, lock = [], threading.Lock()
    stop_at = [None]
    deadline = time.time() + 120
    def worker(i, model):
        c = KilnClient(url, timeout=90)
        seed = 1000 * i
        x = rnd((1, 3, 640, 640), i) if model == "ocr_det" else None
        while time.time() < deadline:
            seed += 1
            inp = {"x": x} if x is not None else simple_inputs(seed)
            t0 = time.time()
            try:
                out = c.infer(model, inp)
                good = det_ok(x, out) if x is not None else simple_ok(inp, out)
                code, msg = ("OK" if good else "WRONG"), ""
            except InferError as e:
                code, msg = e.code.name, e.message
            t1 = time.time()
            with lock:
                results.append((t0, t1, model, code, msg))
            if code != "OK" and stop_at[0] is not None:
                break  # the server is going or gone
            if code != "OK" and stop_at[0] is None:
                time.sleep(0.1)
        c.close()
    threads = [threading.Thread(target=worker, args=(i, "ocr_det")) for i in range(int(det_threads))]
    threads += [threading.Thread(target=worker, args=(100 + i, "simple")) for i in range(int(simple_threads))]
    for t in threads:
        t.start()
    time.sleep(float(warm_s))
    stop_at[0] = time.time()
    rc = subprocess.run(stop_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    stopped = time.time()
    for t in threads:
        t.join()
    s = stop_at[0]
    before = [r for r in results if r[1] <= s]
    inflight = [r for r in results if r[0] < s < r[1]]
    after = [r for r in results if r[0] >= s]
    margin = [r for r in inflight if r[0] > s - 0.05 and r[3] == "UNAVAILABLE"]
    late_cancelled = [r for r in after if r[3] == "CANCELLED"]
    lost = [r for r in results if r[3] not in ("OK", "UNAVAILABLE") and r not in late_cancelled]
    lost += [r for r in inflight if r[3] == "UNAVAILABLE" and r not in margin]
    lost += [r for r in before if r[3] != "OK"]
    summary = {
        "stop_cmd_rc": rc, "stop_seconds": round(stopped - s, 2),
        "completed_before_stop": len(before),
        "in_flight_at_stop": len(inflight),
        "in_flight_answered_ok": sum(r[3] == "OK" for r in inflight),
        "in_flight_refused_within_50ms": len(margin),
        "sent_after_stop": len(after),
        "sent_after_stop_ok": sum(r[3] == "OK" for r in after),
        "sent_after_stop_unavailable": sum(r[3] == "UNAVAILABLE" for r in after),
        "sent_after_stop_cancelled": len(late_cancelled),
        "lost": len(lost),
        # when the stop took effect: the last request sent after the stop
        # that was still served, the first refusal
        "last_ok_sent_after_stop_s": round(max([r[0] - s for r in after if r[3] == "OK"], default=0), 3),
        "first_refusal_s": round(min([r[1] - s for r in results if r[3] == "UNAVAILABLE"], default=-1), 3),
    }
    print(json.dumps(summary))
    with open(os.environ.get("KILN_E2E_REQUESTS_CSV", os.devnull), "w") as f:
        f.write("sent_s,answered_s,model,code,message\n")
        for r in sorted(results):
            f.write(f"{r[0] - s:.3f},{r[1] - s:.3f},{r[2]},{r[3]},{r[4][:100]!r}\n")
    for r in lost[:10]:
        print(f"LOST: {r[2]} sent {r[0] - s:+.3f} s, answered {r[1] - s:+.3f} s after the stop: {r[3]} {r[4][:200]}")
    if lost or not inflight:
        sys.exit(1)

def cmd_prom(prom, what, *args):
    def get(path, **q):
        u = f"http://{prom}{path}" + ("?" + urllib.parse.urlencode(q) if q else "")
        return json.loads(urllib.request.urlopen(u, timeout=10).read())
    if what == "targets":
        deadline = time.time() + float(args[0])
        while True:
            try:
                t = get("/api/v1/targets")["data"]["activeTargets"]
                up = [x for x in t if x["labels"].get("job") == "kilnd" and x["health"] == "up"]
                if up:
                    print(f"{up[0]['scrapeUrl']} health=up lastScrape={up[0]['lastScrape']}")
                    return
                state = [(x["labels"].get("job"), x["health"], x.get("lastError")) for x in t]
            except Exception as e:  # Prometheus still starting
                state = repr(e)
            if time.time() > deadline:
                sys.exit(f"kilnd not up in /api/v1/targets: {state}")
            time.sleep(1)
    if what == "flops":
        r = get("/api/v1/query", query="sum(kiln_estimated_flops_total)")["data"]["result"]
        print(r[0]["value"][1] if r else "0")
    if what == "wait-flops-above":
        floor, deadline = float(args[0]), time.time() + float(args[1])
        while time.time() < deadline:
            r = get("/api/v1/query", query="sum(kiln_estimated_flops_total)")["data"]["result"]
            if r and float(r[0]["value"][1]) > floor:
                print(r[0]["value"][1]); return
            time.sleep(1)
        sys.exit(f"sum(kiln_estimated_flops_total) did not grow above {floor}")

if __name__ == "__main__":
    globals()["cmd_" + sys.argv[1].replace("-", "_")](*sys.argv[2:])
