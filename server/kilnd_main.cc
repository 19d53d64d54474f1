// kilnd: kiln's inference server.
//
//   kilnd --model-repository=models [--grpc-port=8001] [--http-port=8000] [--metrics-port=8002]
//         [--device=CPU] [--model-control-mode=none|explicit] [--load-model=M ...]
//         [--http-address=A] [--http-threads=16] [--http-max-body-bytes=N] [--http-max-json-bytes=N]
//         [--tls-cert=F --tls-key=F] [--auth-token-file=F | --auth-token=T]
//         [--metrics-address=A] [--metrics-auth-token-file=F]
//         [--max-memory-bytes=N] [--exit-timeout=30] [--ready-file=F]
//         [--shm-allow=/PREFIX[,/PREFIX...]] [--shm-max-regions=64]
//
// Runs in the foreground. SIGTERM / SIGINT: stop accepting, finish
// in-flight requests within --exit-timeout seconds, exit 0.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/base/flags.h"
#include "server/auth_token.h"
#include "server/flags.h"
#include "server/http_server.h"
#include "server/kiln_server.h"
#include "server/memory_limit.h"
#include "server/service.h"

namespace {

int Fail(const std::string& msg) {
  std::fprintf(stderr, "kilnd: %s\n", msg.c_str());
  return 2;
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return false;
    f << text;
    if (!f) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  kiln::KilnServerOptions o;
  std::string mode = "none", auth_file, ready_file;
  std::string auth_flag, metrics_auth_file;
  int64_t grpc_port = o.grpc_port, metrics_port = o.metrics_port;
  int64_t http_port = 8000, http_threads = o.http_threads, http_max_body = 0;
  int64_t http_max_json = o.http_max_json_bytes;
  int64_t max_captures = static_cast<int64_t>(o.jit_max_captures);
  int64_t max_capture_bytes = -1;  // default: from --max-memory-bytes
  int64_t beam = kiln::GetEnvInt("BEAM", 0);
  double exit_timeout = 30, load_timeout = 600;
  int64_t max_streams = o.max_streams, max_stream_inflight = o.max_stream_inflight;
  const kiln::MachineMemory machine = kiln::MachineMemoryBytes();
  int64_t max_memory = static_cast<int64_t>(kiln::DefaultMemoryLimit(machine));
  bool help = false, no_pad = false;
  kiln::FlagParser flags;
  flags.AddString("model-repository", &o.model_repository, "model repository directory");
  flags.AddString("address", &o.address,
                  "bind address of the gRPC port (and of the HTTP/REST and metrics ports by "
                  "default)");
  flags.AddInt("grpc-port", &grpc_port, "gRPC port (0: any free port)");
  flags.AddInt("http-port", &http_port,
               "HTTP/REST port, KServe v2 REST + Triton's extensions (0: any free port, -1: "
               "off); HTTPS only with --tls-cert, the same bearer token as gRPC");
  flags.AddString("http-address", &o.http_address,
                  "bind address of the HTTP/REST port (default: --address)");
  flags.AddInt("http-threads", &http_threads,
               "HTTP/REST worker threads (each serves one connection at a time)");
  flags.AddInt("http-max-body-bytes", &http_max_body,
               "largest HTTP/REST request body, refused with 413 before it is read (0: "
               "--max-message-bytes)");
  flags.AddInt("http-max-json-bytes", &http_max_json,
               "largest JSON part of an HTTP/REST request (the whole body, or the header "
               "before binary tensor data), refused with 413: parsed JSON takes up to ~16x "
               "its size in memory; send large tensors as binary data");
  flags.AddInt("metrics-port", &metrics_port, "Prometheus /metrics port (0: any, -1: off)");
  flags.AddString("metrics-address", &o.metrics_address,
                  "bind address of the metrics port (default: --address)");
  flags.AddString("metrics-auth-token-file", &metrics_auth_file,
                  "require 'Authorization: Bearer <token>' on /metrics, the token read from "
                  "this file");
  flags.AddString("device", &o.device, "engine device: CPU, OPENCL, CUDA or INTERP");
  flags.AddString("model-control-mode", &mode, "none (load all at start) or explicit (API)");
  flags.AddList("load-model", &o.load_models, "explicit mode: model to load at start (repeat)");
  flags.AddString("tls-cert", &o.tls_cert,
                  "PEM server certificate chain, leaf first (with --tls-key): gRPC and "
                  "HTTP/REST over TLS 1.2+ only (read at start, at most 1 MiB)");
  flags.AddString("tls-key", &o.tls_key, "PEM private key (with --tls-cert)");
  flags.AddString("auth-token-file", &auth_file,
                  "require 'authorization: Bearer <token>' on the inference RPCs and the "
                  "HTTP/REST paths but /v2/health/*, the token read from this file (also "
                  "$KILN_AUTH_TOKEN; an empty token refuses to start)");
  flags.AddString("auth-token", &auth_flag,
                  "the token itself (warns: other local users see it in /proc/PID/cmdline)");
  std::vector<std::string> shm_allow;
  int64_t shm_max_regions = o.shm_max_regions;
  flags.AddList("shm-allow", &shm_allow,
                "system shared memory (Triton's extension): clients may register POSIX shm "
                "objects whose key starts with this prefix, e.g. /kiln_ ('/' allows any; "
                "repeat or comma-separate; default: shared memory off)");
  flags.AddInt("shm-max-regions", &shm_max_regions,
               "shared-memory regions registered at once (more: RESOURCE_EXHAUSTED)");
  flags.AddInt("max-message-bytes", &o.max_message_bytes, "largest gRPC message");
  flags.AddInt("max-input-bytes", &o.max_input_bytes, "largest input tensor of a request");
  flags.AddInt("max-memory-bytes", &max_memory,
               absl::StrCat("device memory the engine may hold; a request whose plan needs more "
                            "gets RESOURCE_EXHAUSTED (0: no limit; default for CPU and INTERP "
                            "80% of ", machine.source.empty() ? "the machine" : machine.source,
                            ": ", max_memory, "; none for GPUs)"));
  flags.AddDouble("exit-timeout", &exit_timeout, "seconds to finish in-flight requests on exit");
  flags.AddDouble("load-timeout", &load_timeout,
                  "seconds a model load (with warm-up) may take; past it the load fails with "
                  "DEADLINE_EXCEEDED, the model stays UNAVAILABLE (a reload keeps the old "
                  "version) and the load's result is discarded when it ends (0: no limit)");
  flags.AddInt("max-streams", &max_streams,
               "concurrent ModelStreamInfer streams (more: RESOURCE_EXHAUSTED)");
  flags.AddInt("max-stream-inflight", &max_stream_inflight,
               "unanswered requests per stream before it stops reading (backpressure)");
  flags.AddInt("jit-max-captures", &max_captures, "JIT captures kept per model instance (LRU)");
  flags.AddInt("jit-max-capture-bytes", &max_capture_bytes,
               "device bytes the JIT captures of one model instance may hold (intermediates and "
               "outputs kept for replays; least recently used dropped past it; default 1 GiB, "
               "or a quarter of --max-memory-bytes if that is smaller)");
  flags.AddInt("beam", &beam,
               "CPU: rounds of timed search over the kernel heuristics' choices for each new "
               "matmul / convolution / reduce kernel, at its first compile (load and warm-up "
               "take longer); choices cached in $KILN_CACHE_DIR/beam (0: off; default $BEAM "
               "or 0)");
  flags.AddInt("default-max-batch", &o.default_max_batch,
               "max_batch_size of configs derived from a model without config.pbtxt");
  flags.AddBool("no-pad", &no_pad, "never pad a batch up to a captured batch size");
  flags.AddBool("exit-on-error", &o.exit_on_error, "exit if a startup model fails to load");
  flags.AddString("ready-file", &ready_file,
                  "write 'grpc_port=N', 'http_port=N' and 'metrics_port=N' lines here once "
                  "ready (-1: off)");
  flags.AddBool("help", &help, "print this help");
  absl::Status s = flags.Parse(argc, argv);
  if (!s.ok()) return Fail(absl::StrCat(s.message(), "\nflags:\n", flags.Usage()));
  if (help) {
    std::printf("usage: kilnd [flags]\n%s", flags.Usage().c_str());
    return 0;
  }
  if (!flags.positional().empty()) return Fail("unexpected argument " + flags.positional()[0]);
  if (mode == "none") o.mode = kiln::ControlMode::kNone;
  else if (mode == "explicit") o.mode = kiln::ControlMode::kExplicit;
  else return Fail("--model-control-mode must be none or explicit");
  if (!o.load_models.empty() && o.mode != kiln::ControlMode::kExplicit)
    return Fail("--load-model needs --model-control-mode=explicit");
  if (grpc_port < 0 || grpc_port > 65535) return Fail("--grpc-port out of range");
  if (metrics_port < -1 || metrics_port > 65535) return Fail("--metrics-port out of range");
  if (http_port < -1 || http_port > 65535) return Fail("--http-port out of range");
  if (http_threads < 1 || http_threads > 1024) return Fail("--http-threads out of range");
  if (http_max_body < 0) return Fail("--http-max-body-bytes must be >= 0");
  if (http_max_json < 1) return Fail("--http-max-json-bytes must be >= 1");
  if (exit_timeout < 0 || exit_timeout > 86400) return Fail("--exit-timeout out of range");
  if (!(load_timeout >= 0 && load_timeout <= 86400)) return Fail("--load-timeout out of range");
  if (max_captures < 1 || max_captures > 4096) return Fail("--jit-max-captures out of range");
  if (flags.IsSet("jit-max-capture-bytes") && max_capture_bytes < 0)
    return Fail("--jit-max-capture-bytes must be >= 0");
  if (beam < 0 || beam > 10) return Fail("--beam must be in [0, 10]");
  if (max_streams < 0 || max_streams > 4096) return Fail("--max-streams out of range");
  if (max_stream_inflight < 1 || max_stream_inflight > 65536)
    return Fail("--max-stream-inflight out of range");
  if (max_memory < 0) return Fail("--max-memory-bytes must be >= 0");
  for (const std::string& list : shm_allow)
    for (absl::string_view prefix : absl::StrSplit(list, ',', absl::SkipEmpty()))
      o.shm_allow.emplace_back(prefix);
  if (flags.IsSet("shm-allow") && o.shm_allow.empty())
    return Fail("--shm-allow needs a prefix such as /kiln_");
  if (shm_max_regions < 1 || shm_max_regions > 65536)
    return Fail("--shm-max-regions must be in [1, 65536]");
  o.shm_max_regions = static_cast<int>(shm_max_regions);
  // Host RAM says nothing of a GPU's memory: there the driver's own
  // out-of-memory error (a Status too) is the default bound.
  const bool host_device = absl::AsciiStrToUpper(o.device) == "CPU" ||
                           absl::AsciiStrToUpper(o.device) == "INTERP";
  if (!flags.IsSet("max-memory-bytes") && !host_device) max_memory = 0;
  o.max_memory_bytes = static_cast<uint64_t>(max_memory);
  if (!flags.IsSet("jit-max-capture-bytes")) {
    max_capture_bytes = int64_t{1} << 30;
    if (max_memory > 0) max_capture_bytes = std::min(max_capture_bytes, max_memory / 4);
  }
  o.max_streams = static_cast<int>(max_streams);
  o.max_stream_inflight = static_cast<int>(max_stream_inflight);
  if (o.default_max_batch < 0 || o.default_max_batch > 65536)
    return Fail("--default-max-batch out of range");
  o.grpc_port = static_cast<int>(grpc_port);
  o.metrics_port = static_cast<int>(metrics_port);
  o.http_port = static_cast<int>(http_port);
  o.http_threads = static_cast<int>(http_threads);
  o.http_max_body_bytes = http_max_body;
  o.http_max_json_bytes = http_max_json;
  o.exit_timeout = absl::Seconds(exit_timeout);
  o.load_timeout = load_timeout == 0 ? absl::InfiniteDuration() : absl::Seconds(load_timeout);
  o.jit_max_captures = static_cast<size_t>(max_captures);
  o.jit_max_capture_bytes = static_cast<size_t>(max_capture_bytes);
  o.beam = static_cast<int>(beam);
  o.pad_to_captured = !no_pad;
  kiln::AuthTokenSources auth;
  if (flags.IsSet("auth-token")) auth.flag = auth_flag;
  if (flags.IsSet("auth-token-file")) auth.file = auth_file;
  if (const char* t = std::getenv("KILN_AUTH_TOKEN")) auth.env = t;
  auto token = kiln::ResolveAuthToken(auth);
  if (!token.ok()) return Fail(std::string(token.status().message()));
  if (!token->warning.empty())
    std::fprintf(stderr, "kilnd: warning: %s\n", token->warning.c_str());
  o.auth_token = token->token;
  if (flags.IsSet("metrics-auth-token-file")) {
    auto t = kiln::ReadTokenFile(metrics_auth_file, "--metrics-auth-token-file");
    if (!t.ok()) return Fail(std::string(t.status().message()));
    o.metrics_auth_token = *t;
  }

  // Signals are taken by sigwait on this thread; every other thread (gRPC,
  // batchers, engine workers) inherits the blocked mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = kiln::KilnServer::Start(o);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  if (!(*server)->startup_status().ok())
    std::fprintf(stderr, "kilnd: warning: %s\n",
                 std::string((*server)->startup_status().message()).c_str());
  for (const auto& e : (*server)->manager()->Index(false))
    std::fprintf(stderr, "kilnd: model %s %s %s%s%s\n", e.name.c_str(),
                 e.version.empty() ? "-" : e.version.c_str(), e.state.c_str(),
                 e.reason.empty() ? "" : ": ", e.reason.c_str());
  std::fprintf(stderr, "kilnd %s: serving gRPC on %s:%d%s, metrics on %s\n",
               kiln::kServerVersion, o.address.c_str(), (*server)->grpc_port(),
               o.tls_cert.empty() ? "" : " (TLS)",
               (*server)->metrics_port() >= 0
                   ? absl::StrCat("http://",
                                  o.metrics_address.empty() ? o.address : o.metrics_address,
                                  ":", (*server)->metrics_port(), "/metrics",
                                  o.metrics_auth_token.empty() ? "" : " (bearer auth)")
                         .c_str()
                   : "(off)");
  if ((*server)->http_port() >= 0)
    std::fprintf(stderr, "kilnd: serving HTTP/REST on %s://%s:%d%s\n",
                 o.tls_cert.empty() ? "http" : "https",
                 (o.http_address.empty() ? o.address : o.http_address).c_str(),
                 (*server)->http_port(), o.auth_token.empty() ? "" : " (bearer auth)");
  if (!o.shm_allow.empty())
    std::fprintf(stderr, "kilnd: system shared memory on for keys %s\n",
                 absl::StrJoin(o.shm_allow, ", ").c_str());
  std::fprintf(stderr, "kilnd: memory limit %s\n",
               o.max_memory_bytes == 0
                   ? "none (--max-memory-bytes=0)"
                   : absl::StrCat(o.max_memory_bytes, " bytes of ", o.device, " memory").c_str());
  if (!ready_file.empty() &&
      !WriteFileAtomically(ready_file, absl::StrCat("grpc_port=", (*server)->grpc_port(),
                                                    "\nhttp_port=", (*server)->http_port(),
                                                    "\nmetrics_port=", (*server)->metrics_port(),
                                                    "\npid=", getpid(), "\n")))
    std::fprintf(stderr, "kilnd: warning: cannot write %s\n", ready_file.c_str());

  int sig = 0;
  sigwait(&sigs, &sig);
  std::fprintf(stderr, "kilnd: %s: finishing in-flight requests (up to %gs), then exiting\n",
               sig == SIGTERM ? "SIGTERM" : "SIGINT", exit_timeout);
  const bool clean = (*server)->Shutdown();
  std::fprintf(stderr, "kilnd: stopped%s\n", clean ? "" : " (a model load was left running)");
  std::fflush(stderr);
  // Everything is drained; skip tearing down the metrics HTTP server, which
  // would only add seconds to the exit.
  std::_Exit(0);
}
