// kiln: command-line client of kilnd (and of any KServe v2 / Triton gRPC
// server).
//
//   kiln health                                   liveness, readiness, gRPC health
//   kiln models [index|load M|unload M]           repository index / control
//   kiln metadata M | config M | stats [M]        model metadata, config, statistics
//   kiln infer --model M --input NAME=FILE.npy... [--output-dir DIR]
//   kiln perf --model M --concurrency 1:16 [--protocol grpc|http] [--shape NAME=d,d,..]
//             [--batch N] [--shared-memory none|system] [--export-json FILE]
//             [--export-csv FILE]   (clients/perf_cli.h)
//
// Common flags: --url host:port (default localhost:8001; perf --protocol http:
// the HTTP/REST port, default localhost:8000), --tls, --ca-cert
// FILE, --tls-server-name NAME, --auth-token T (or $KILN_AUTH_TOKEN),
// --timeout SECONDS. Exit status: 0 ok, 1 the server said no, 2 usage.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include <sys/stat.h>

#include "clients/client.h"
#include "clients/run/run_command.h"
#include "clients/npy.h"
#include "clients/perf_cli.h"
#include "google/protobuf/text_format.h"
#include "server/flags.h"

namespace kiln {
namespace {

constexpr char kUsage[] =
    "usage: kiln [flags] COMMAND ...\n"
    "commands:\n"
    "  health                         server liveness / readiness / gRPC health\n"
    "  models [index]                 list the repository's models and their state\n"
    "  models load MODEL              load (or reload) a model (explicit control mode)\n"
    "  models unload MODEL            unload a model, draining its requests\n"
    "  metadata MODEL | config MODEL  model metadata / configuration\n"
    "  stats [MODEL]                  inference statistics\n"
    "  infer --model M --input NAME=FILE.npy ... [--output-dir DIR] [--output NAME ...]\n"
    "  perf --model M [--protocol grpc|http] [--concurrency 1:16] [--shape NAME=d,d,...]\n"
    "       [--batch N] [--window-ms 1000] [--stability 0.1] [--max-windows 10]\n"
    "       [--shared-memory none|system [--output-shared-memory-size BYTES]]\n"
    "       [--export-json FILE] [--export-csv FILE] [--bench-prefix P]\n"
    "       load generator over gRPC (--url, default localhost:8001) or KServe v2 HTTP/REST\n"
    "       with binary tensor data (--protocol http: --url host:port or http://host:port,\n"
    "       default localhost:8000)\n"
    "  run --model PATH.onnx ...      run a model locally in kiln's engine (kiln run --help)\n";

int Usage(const std::string& msg, const FlagParser& flags) {
  if (!msg.empty()) std::fprintf(stderr, "kiln: %s\n", msg.c_str());
  std::fprintf(stderr, "%sflags:\n%s", kUsage, flags.Usage().c_str());
  return 2;
}

int Error(const absl::Status& s) {
  std::fprintf(stderr, "kiln: %s\n", s.ToString().c_str());
  return 1;
}

std::string Text(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(m, &out);
  return out;
}

int Health(KilnClient* c) {
  auto live = c->ServerLive();
  auto ready = c->ServerReady();
  auto health = c->Health();
  std::printf("live: %s\nready: %s\nhealth: %s\n",
              live.ok() ? (*live ? "true" : "false") : live.status().ToString().c_str(),
              ready.ok() ? (*ready ? "true" : "false") : ready.status().ToString().c_str(),
              health.ok() ? health->c_str() : health.status().ToString().c_str());
  return live.ok() && *live && ready.ok() && *ready ? 0 : 1;
}

int Models(KilnClient* c, const std::vector<std::string>& args) {
  if (args.size() <= 1 || args[1] == "index") {
    auto idx = c->RepositoryIndex();
    if (!idx.ok()) return Error(idx.status());
    std::printf("%-24s %-8s %-12s %s\n", "MODEL", "VERSION", "STATE", "REASON");
    for (const auto& m : idx->models())
      std::printf("%-24s %-8s %-12s %s\n", m.name().c_str(),
                  m.version().empty() ? "-" : m.version().c_str(), m.state().c_str(),
                  m.reason().c_str());
    return 0;
  }
  if (args.size() != 3 || (args[1] != "load" && args[1] != "unload")) {
    std::fprintf(stderr, "kiln: models [index | load MODEL | unload MODEL]\n");
    return 2;
  }
  absl::Status s = args[1] == "load" ? c->LoadModel(args[2]) : c->UnloadModel(args[2]);
  if (!s.ok()) return Error(s);
  std::printf("%s: %s\n", args[2].c_str(), args[1] == "load" ? "loaded" : "unloaded");
  return 0;
}

int Infer(KilnClient* c, const std::string& model, const std::vector<std::string>& inputs,
          const std::vector<std::string>& outputs, const std::string& out_dir,
          const InferOptions& base) {
  if (model.empty() || inputs.empty()) {
    std::fprintf(stderr, "kiln: infer needs --model and at least one --input NAME=FILE.npy\n");
    return 2;
  }
  std::vector<ClientTensor> tensors;
  for (const std::string& spec : inputs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "kiln: --input '%s' must be NAME=FILE.npy\n", spec.c_str());
      return 2;
    }
    auto t = ReadNpyTensor(spec.substr(eq + 1));
    if (!t.ok()) return Error(t.status());
    t->name = spec.substr(0, eq);
    tensors.push_back(std::move(*t));
  }
  InferOptions o = base;
  o.outputs = outputs;
  auto result = c->Infer(model, tensors, o);
  if (!result.ok()) return Error(result.status());
  // Like mkdir -p: the output directory may not exist yet.
  for (size_t pos = 1; pos <= out_dir.size(); ++pos)
    if (pos == out_dir.size() || out_dir[pos] == '/') mkdir(out_dir.substr(0, pos).c_str(), 0755);
  for (const ClientTensor& t : *result) {
    std::string path = absl::StrCat(out_dir, "/", t.name, ".npy");
    for (char& ch : path)
      if (ch == ':') ch = '_';
    absl::Status s = WriteNpyTensor(path, t);
    if (!s.ok()) return Error(s);
    std::string shape;
    for (size_t i = 0; i < t.shape.size(); ++i) absl::StrAppend(&shape, i ? "," : "", t.shape[i]);
    std::printf("%s %s [%s] -> %s\n", t.name.c_str(), t.datatype.c_str(), shape.c_str(),
                path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  // `kiln run` runs a model in-process on the engine (no server involved).
  if (argc >= 2 && std::string(argv[1]) == "run") return kiln::RunCommand(argc - 1, argv + 1);
  using namespace kiln;
  ClientOptions co;
  std::string url = "localhost:8001", model, version, out_dir = ".";
  std::vector<std::string> inputs, outputs;
  double timeout = 60;
  int64_t priority = 0, queue_timeout_us = 0;
  bool help = false;
  PerfFlags perf_flags;
  FlagParser flags;
  flags.AddString("url", &url,
                  "server address host:port (gRPC; perf --protocol http: the HTTP/REST port, "
                  "default localhost:8000)");
  flags.AddBool("tls", &co.tls, "use TLS");
  flags.AddString("ca-cert", &co.ca_cert_file, "PEM root certificates for --tls");
  flags.AddString("tls-server-name", &co.tls_server_name, "certificate name to expect");
  flags.AddString("auth-token", &co.auth_token, "bearer token (also $KILN_AUTH_TOKEN)");
  flags.AddDouble("timeout", &timeout, "per-call deadline in seconds");
  flags.AddString("model", &model, "model name");
  flags.AddString("model-version", &version, "model version (default: latest)");
  flags.AddList("input", &inputs, "infer: NAME=FILE.npy (repeat)");
  flags.AddList("output", &outputs, "infer: output to return (repeat; default all)");
  flags.AddString("output-dir", &out_dir, "infer: where NAME.npy outputs are written");
  flags.AddInt("priority", &priority, "infer: request priority (1 = highest)");
  flags.AddInt("queue-timeout-us", &queue_timeout_us, "infer: server-side queue timeout");
  AddPerfFlags(&flags, &perf_flags);
  flags.AddBool("help", &help, "print help");
  absl::Status ps = flags.Parse(argc, argv);
  if (!ps.ok()) return Usage(std::string(ps.message()), flags);
  if (help) {
    std::printf("%sflags:\n%s", kUsage, flags.Usage().c_str());
    return 0;
  }
  const std::vector<std::string>& args = flags.positional();
  if (args.empty()) return Usage("no command", flags);
  if (co.auth_token.empty())
    if (const char* t = std::getenv("KILN_AUTH_TOKEN")) co.auth_token = t;
  if (timeout <= 0 || timeout > 86400) return Usage("--timeout out of range", flags);
  co.address = url;
  co.timeout = absl::Seconds(timeout);
  const std::string& cmd = args[0];
  if (cmd == "perf") {
    auto pc = ResolvePerfFlags(perf_flags, model, version, co, flags.IsSet("url"));
    if (!pc.ok()) return Usage(std::string(pc.status().message()), flags);
    return RunPerfCommand(*pc);
  }
  if (flags.IsSet("protocol") && perf_flags.protocol != "grpc")
    return Usage("--protocol " + perf_flags.protocol + " is for perf only", flags);
  auto client = KilnClient::Connect(co);
  if (!client.ok()) return Error(client.status());
  KilnClient* c = client->get();
  if (cmd == "health") return Health(c);
  if (cmd == "models") return Models(c, args);
  if (cmd == "metadata" || cmd == "config") {
    if (args.size() != 2) return Usage(cmd + " needs MODEL", flags);
    if (cmd == "metadata") {
      auto m = c->ModelMetadata(args[1], version);
      if (!m.ok()) return Error(m.status());
      std::printf("%s", Text(*m).c_str());
    } else {
      auto m = c->ModelConfig(args[1], version);
      if (!m.ok()) return Error(m.status());
      std::printf("%s", Text(m->config()).c_str());
    }
    return 0;
  }
  if (cmd == "stats") {
    auto s = c->ModelStatistics(args.size() > 1 ? args[1] : "", version);
    if (!s.ok()) return Error(s.status());
    std::printf("%s", Text(*s).c_str());
    return 0;
  }
  if (cmd == "infer") {
    InferOptions o;
    o.version = version;
    o.priority = priority;
    o.timeout_us = queue_timeout_us;
    return Infer(c, model, inputs, outputs, out_dir, o);
  }
  return Usage("unknown command '" + cmd + "'", flags);
}
