#pragma once
// Files in tests, for every suite that reads what it wrote: a whole file read back, and a
// fresh folder of its own for each test.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace txbatch::test {

// The environment variable `name`, or "" where it is unset.
inline std::string EnvOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The whole file at `path`; empty when there is none (or it cannot be read).
inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An empty folder PREFIX_NAME_PID under the test's temp dir, made afresh: one per test and per
// test process.
inline std::filesystem::path Scratch(const std::string& prefix, const std::string& name) {
  const std::filesystem::path d = std::filesystem::path(::testing::TempDir()) /
                                  (prefix + "_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

}  // namespace txbatch::test
