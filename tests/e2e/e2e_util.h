// Helpers of the end-to-end tests: a model repository built from the
// shipped `simple` model with config variants, a kilnd child process on
// free loopback ports (reported through --ready-file), and a Prometheus
// server scraping it.
//
// Thread safety: KilnProcess and PrometheusProcess are used from the test's
// main thread.
#ifndef KILN_TESTS_E2E_E2E_UTIL_H_
#define KILN_TESTS_E2E_E2E_UTIL_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/client.h"

namespace kiln::e2e {

// $TEST_TMPDIR (or /tmp) + "/" + name, created.
std::string TempDir(const std::string& name);

// A repository under TempDir(name) with the shipped `simple` model
// (runfiles models/simple) and, for each entry of `variants`, a model of
// that name with the same model file and the given config.pbtxt text
// ("" = no config.pbtxt: derived). Returns its path.
absl::StatusOr<std::string> MakeRepo(const std::string& name,
                                     const std::map<std::string, std::string>& variants);

// config.pbtxt of the shipped `simple` model (two FP32 [16] inputs, two
// outputs) with max_batch_size 8 and dynamic batching: a batching window of
// `delay_us` microseconds, and preferred batch size 8 when `preferred_8`.
std::string SimpleBatchedConfig(int64_t delay_us, bool preferred_8 = false);

class KilnProcess {
 public:
  // Starts `kilnd` (path from argv of the test) with `args` plus
  // --address=127.0.0.1 --grpc-port=0 --metrics-port=0 --http-port=0
  // --ready-file=... (later flags in `args` win);
  // waits until it is ready (or fails if it exits first).
  static absl::StatusOr<std::unique_ptr<KilnProcess>> Start(const std::string& kilnd,
                                                            std::vector<std::string> args,
                                                            absl::Duration timeout = absl::Seconds(120));
  ~KilnProcess();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_port_; }  // -1: off
  pid_t pid() const { return pid_; }
  std::string address() const;
  // Calls time out after `timeout` (a first call of a big model compiles
  // its kernels).
  std::unique_ptr<KilnClient> Client(const std::string& token = "",
                                     absl::Duration timeout = absl::Seconds(30)) const;
  bool Running();
  void Signal(int sig);
  // Waits for exit; returns the exit code (or -signal), or an error on timeout.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  std::string log_path() const { return log_; }

 private:
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
  std::string log_;
};

// A Prometheus server (/usr/bin/prometheus, Debian package) on a free
// 127.0.0.1 port with its config, data and log under TempDir(name),
// scraping 127.0.0.1:target_port every second as job "kilnd".
class PrometheusProcess {
 public:
  // Starts it and waits until /-/ready answers (or fails if it exits first).
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(
      const std::string& name, int target_port, absl::Duration timeout = absl::Seconds(90));
  // Stops it: SIGTERM, then waits for the exit.
  ~PrometheusProcess();

  int port() const { return port_; }
  std::string log_path() const { return log_; }
  // GET /api/v1/query?query=<promql>: the JSON body. Prometheus answers
  // invalid PromQL with HTTP 400, returned as an error.
  absl::StatusOr<std::string> Query(const std::string& promql) const;

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// `s` percent-encoded for a URL query string (all but [A-Za-z0-9_]).
std::string UrlEncode(const std::string& s);

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// Runs `command` with /bin/sh; returns its exit status (-1 if it could not run).
int Shell(const std::string& command);

// Float tensor helpers.
ClientTensor FloatTensor(const std::string& name, const std::vector<float>& v,
                         std::vector<int64_t> shape);
std::vector<float> Floats(const ClientTensor& t);

}  // namespace kiln::e2e

#endif  // KILN_TESTS_E2E_E2E_UTIL_H_
