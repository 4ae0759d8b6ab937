#pragma once
// The kernel reference (scripts/kernel-ref.sh, doc/fidelity.md "The kernel's own run"), run once
// per test process and read by every case that needs them: five guest boots (UDP with BQL pinned
// at 10 and 40 frames and dynamic, ~2 min under TCG; TCP with 1 and 8 streams through a 40 Mbit/s
// bottleneck, ~45 s more), not five a case.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace txbatch::test {

// 60-byte frames (64 on the wire with the FCS), 20000 a thread on two kpktgend threads (one a
// vCPU): ~20 s a case under TCG, three cases.
inline constexpr uint64_t kKrefPktSize = 60;
inline constexpr uint64_t kKrefCount = 20000;
inline constexpr uint64_t kKrefThreads = 2;
// TCP: 1 and 8 streams for 5 s each (~22 s a case with the boot), through tbf at 40 Mbit/s below
// the sockets, so that the guest's skbs wait below them as they do for a wire. The rate is what
// the guest keeps busy on a loaded host (2026-12-06, load average 5-7: 91-100 % of 40 Mbit/s
// delivered in five runs; of 60, 91-97 % in four and 51 % once under a heavier load; of 80,
// 82-95 %).
inline constexpr uint64_t kKrefTcpSeconds = 5;
inline constexpr uint64_t kKrefTcpRateMbps = 40;

struct KernelReferenceRun {
  int status = -1;   // kernel-ref.sh's exit status (0: the document is there)
  std::string path;  // the document
  std::string log;   // what kernel-ref.sh said, for a failure's message
};

// Runs `scripts/kernel-ref.sh --bql 10,40,dynamic --tcp 1,8 --tcp-rate 40` the first time it is
// called (with the constants above, into a scratch folder of this process; records bql_10,
// bql_40, bql_dynamic, tcp_1 and tcp_8, in that order) and returns that run ever after.
// TXBATCH_KERNEL_REF=FILE takes FILE, a document the script wrote before, instead of booting
// guests (to work on the comparison, or to show it fails on a wrong model, in seconds).
const KernelReferenceRun& KernelReferenceShared();

// `scripts/kernel-ref.sh ARGS` run into a scratch folder of this process ("kernel_ref",
// `scratch`; kept until the process ends, and after it where a test failed: the evidence), its
// document there as kernel-ref.json; or, where the environment variable `env` names a file, that
// document (one the script wrote before) instead of booting guests.
KernelReferenceRun RunKernelRef(const char* env, const std::string& scratch,
                                const std::string& args);

// The kernel reference's document beside the one scripts/kernel-vs-model.py writes of its cases
// of `mode` (udp or tcp) into `dir` (a scratch folder "kernel_model", `mode`), the script's
// side-by-side tables printed too. Fails the test fatally where the reference or the script
// failed: call it in ASSERT_NO_FATAL_FAILURE.
struct KernelBesideModel {
  nlohmann::json kref, model;
  std::filesystem::path dir;  // the script's document and log; the caller removes it once passed
};
void ReadKernelBesideModel(const std::string& mode, KernelBesideModel* out);

// A count in a kernel reference document: there and a whole number (a missing key throws;
// anything else fails and reads as UINT64_MAX, so no `== 0` passes on it).
inline uint64_t Count(const nlohmann::json& obj, const std::string& key) {
  const nlohmann::json& v = obj.at(key);
  if (!v.is_number_unsigned()) {
    ADD_FAILURE() << key << " is not a count: " << v.dump();
    return UINT64_MAX;
  }
  return v.get<uint64_t>();
}

}  // namespace txbatch::test
