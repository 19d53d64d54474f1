// A main for a fuzz target in the regular (gcc) build: runs every file of
// the directories (or the files) given on the command line through
// LLVMFuzzerTestOneInput, so the seed corpus and every reproducer added to
// it are replayed by `bazel test`.
//
//   replay_main DIR_OR_FILE...
//
// Fails (exit 1) when an argument is missing, a directory holds no files
// (a corpus that vanished must not pass silently), or the target returns
// nonzero; a crash or abort in the target fails the test by itself. Each
// input is copied into a buffer of exactly its size, as libFuzzer does, so
// an ASan build catches reads past its end.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

// The regular files in `dir`, sorted (a stable order for the log).
std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string path = dir + "/" + e->d_name;
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) out.push_back(path);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool RunFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::unique_ptr<uint8_t[]> copy(new uint8_t[bytes.size()]);
  std::copy(bytes.begin(), bytes.end(), copy.get());
  int rc = LLVMFuzzerTestOneInput(copy.get(), bytes.size());
  if (rc != 0) std::fprintf(stderr, "replay: %s returned %d\n", path.c_str(), rc);
  return rc == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
    return 1;
  }
  int ran = 0, failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    struct stat st;
    if (stat(arg.c_str(), &st) != 0) {
      std::fprintf(stderr, "replay: %s does not exist\n", arg.c_str());
      return 1;
    }
    std::vector<std::string> files = S_ISDIR(st.st_mode) ? FilesIn(arg)
                                                         : std::vector<std::string>{arg};
    if (files.empty()) {
      std::fprintf(stderr, "replay: %s holds no files\n", arg.c_str());
      return 1;
    }
    for (const std::string& path : files) {
      ++ran;
      if (!RunFile(path)) ++failed;
    }
  }
  std::printf("replay: %d inputs, %d failed\n", ran, failed);
  return failed == 0 ? 0 : 1;
}
