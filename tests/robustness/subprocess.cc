#include "tests/robustness/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kiln::hostile {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

std::string ProcessResult::Describe() const {
  if (!started) return "could not start";
  if (timed_out) return "timed out (killed)";
  if (signal != 0) return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exit ", exit_code);
}

ProcessResult RunProcess(const std::vector<std::string>& argv_in, absl::Duration timeout,
                         uint64_t address_space_bytes) {
  static int counter = 0;
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string base = absl::StrCat(tmp ? tmp : "/tmp", "/proc_", ::getpid(), "_", counter++);
  std::string out_path = base + ".out", err_path = base + ".err";
  std::vector<std::string> args = argv_in;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ProcessResult r;
  // Everything is prepared before fork: only async-signal-safe calls in the
  // child.
  pid_t pid = ::fork();
  if (pid < 0) return r;
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) ::dup2(out, 1);
    if (err >= 0) ::dup2(err, 2);
    if (address_space_bytes > 0) {
      struct rlimit lim = {address_space_bytes, address_space_bytes};
      ::setrlimit(RLIMIT_AS, &lim);
    }
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  r.started = true;
  absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (absl::Now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!r.timed_out) {
    if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  }
  r.out = Slurp(out_path);
  r.err = Slurp(err_path);
  return r;
}

}  // namespace kiln::hostile
