#include "tests/e2e/e2e_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "server/testing/http_get.h"

namespace kiln::e2e {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  return static_cast<bool>(f);
}

}  // namespace

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(base ? base : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

std::string SimpleBatchedConfig(int64_t delay_us, bool preferred_8) {
  return absl::StrCat(R"pb(
    max_batch_size: 8
    input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
            { name: "INPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
    output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] },
             { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 16 ] } ]
    dynamic_batching { )pb",
                      preferred_8 ? "preferred_batch_size: [ 8 ] " : "",
                      "max_queue_delay_microseconds: ", delay_us, " }\n");
}

absl::StatusOr<std::string> MakeRepo(const std::string& name,
                                     const std::map<std::string, std::string>& variants) {
  auto model = ReadFile("models/simple/1/model.onnx");
  if (!model.ok()) return model.status();
  auto config = ReadFile("models/simple/config.pbtxt");
  if (!config.ok()) return config.status();
  std::string root = TempDir(name);
  std::map<std::string, std::string> all = variants;
  all["simple"] = *config;
  for (const auto& [m, text] : all) {
    std::string dir = root + "/" + m;
    ::mkdir(dir.c_str(), 0755);
    ::mkdir((dir + "/1").c_str(), 0755);
    if (!WriteFile(dir + "/1/model.onnx", *model))
      return absl::InternalError("cannot write " + dir);
    if (!text.empty() && !WriteFile(dir + "/config.pbtxt", text))
      return absl::InternalError("cannot write " + dir);
  }
  return root;
}

absl::StatusOr<std::unique_ptr<KilnProcess>> KilnProcess::Start(const std::string& kilnd,
                                                                std::vector<std::string> args,
                                                                absl::Duration timeout) {
  static int counter = 0;
  std::string dir = TempDir(absl::StrCat("kilnd_", ::getpid(), "_", counter++));
  std::string ready = dir + "/ready";
  auto p = std::unique_ptr<KilnProcess>(new KilnProcess());
  p->log_ = dir + "/kilnd.log";
  args.insert(args.begin(), {kilnd, "--address=127.0.0.1", "--grpc-port=0", "--metrics-port=0",
                             "--http-port=0", "--ready-file=" + ready});
  // Everything the child needs is prepared before fork: between fork and
  // exec only async-signal-safe calls (the test may have gRPC threads).
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* log_path = p->log_.c_str();
  pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int fd = ::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  p->pid_ = pid;
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (!p->Running()) {
      auto log = ReadFile(p->log_);
      return absl::InternalError(absl::StrCat("kilnd exited with ", p->exit_code_, ": ",
                                              log.ok() ? *log : ""));
    }
    auto text = ReadFile(ready);
    if (text.ok()) {
      for (absl::string_view line : absl::StrSplit(*text, '\n')) {
        std::vector<std::string> kv = absl::StrSplit(line, '=');
        if (kv.size() != 2) continue;
        if (kv[0] == "grpc_port") (void)absl::SimpleAtoi(kv[1], &p->grpc_port_);
        if (kv[0] == "metrics_port") (void)absl::SimpleAtoi(kv[1], &p->metrics_port_);
        if (kv[0] == "http_port") (void)absl::SimpleAtoi(kv[1], &p->http_port_);
      }
      if (p->grpc_port_ > 0) return p;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError("kilnd did not become ready");
}

KilnProcess::~KilnProcess() {
  if (pid_ > 0 && Running()) {
    ::kill(pid_, SIGKILL);
    (void)Wait(absl::Seconds(10));
  }
}

std::string KilnProcess::address() const { return absl::StrCat("127.0.0.1:", grpc_port_); }

std::unique_ptr<KilnClient> KilnProcess::Client(const std::string& token,
                                                absl::Duration timeout) const {
  ClientOptions o;
  o.address = address();
  o.auth_token = token;
  o.timeout = timeout;
  return *KilnClient::Connect(o);
}

bool KilnProcess::Running() {
  if (exited_) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == 0) return true;
  exited_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return false;
}

void KilnProcess::Signal(int sig) {
  if (Running()) ::kill(pid_, sig);
}

absl::StatusOr<int> KilnProcess::Wait(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (Running()) {
    if (absl::Now() > deadline) return absl::DeadlineExceededError("kilnd did not exit");
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exit_code_;
}

absl::StatusOr<std::unique_ptr<PrometheusProcess>> PrometheusProcess::Start(
    const std::string& name, int target_port, absl::Duration timeout) {
  std::string dir = TempDir(name);
  auto p = std::unique_ptr<PrometheusProcess>(new PrometheusProcess());
  p->port_ = FreePort();
  p->log_ = dir + "/prometheus.log";
  if (!WriteFile(dir + "/prometheus.yml",
                 absl::StrCat("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n",
                              "scrape_configs:\n  - job_name: kilnd\n    static_configs:\n",
                              "      - targets: ['127.0.0.1:", target_port, "']\n")))
    return absl::InternalError("cannot write " + dir + "/prometheus.yml");
  // Prepared before fork: only async-signal-safe calls in the child.
  std::string config = "--config.file=" + dir + "/prometheus.yml";
  std::string storage = "--storage.tsdb.path=" + dir + "/data";
  std::string listen = absl::StrCat("--web.listen-address=127.0.0.1:", p->port_);
  const char* log_path = p->log_.c_str();
  pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    int fd = ::open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execl("/usr/bin/prometheus", "prometheus", config.c_str(), storage.c_str(), listen.c_str(),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  p->pid_ = pid;
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      p->pid_ = -1;
      return absl::InternalError("prometheus exited (see " + p->log_ + ")");
    }
    if (testing::HttpGet(p->port_, "/-/ready").ok()) return p;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError("prometheus did not start (see " + p->log_ + ")");
}

PrometheusProcess::~PrometheusProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  int status;
  ::waitpid(pid_, &status, 0);
}

absl::StatusOr<std::string> PrometheusProcess::Query(const std::string& promql) const {
  return testing::HttpGet(port_, "/api/v1/query?query=" + UrlEncode(promql));
}

std::string UrlEncode(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') out += ch;
    else out += absl::StrFormat("%%%02X", static_cast<unsigned char>(ch));
  }
  return out;
}

int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

int Shell(const std::string& command) {
  int status = std::system(command.c_str());
  if (status == -1) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

ClientTensor FloatTensor(const std::string& name, const std::vector<float>& v,
                         std::vector<int64_t> shape) {
  ClientTensor t{name, "FP32", std::move(shape), ""};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  return t;
}

std::vector<float> Floats(const ClientTensor& t) {
  std::vector<float> v(t.data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), t.data.data(), v.size() * 4);
  return v;
}

}  // namespace kiln::e2e
