#pragma once
// The kernel reference's UDP cases (scripts/kernel-ref.sh, doc/fidelity.md "The kernel's own
// run"), run once per test process and read by every case that needs them: three guest boots
// (BQL pinned at 10 and 40 frames, and dynamic; ~2 min under TCG), not three a case.

#include <cstdint>
#include <string>

namespace txbatch::test {

// 60-byte frames (64 on the wire with the FCS), 20000 a thread on two kpktgend threads (one a
// vCPU): ~20 s a case under TCG, three cases.
inline constexpr uint64_t kKrefPktSize = 60;
inline constexpr uint64_t kKrefCount = 20000;
inline constexpr uint64_t kKrefThreads = 2;

struct KernelReferenceRun {
  int status = -1;   // kernel-ref.sh's exit status (0: the document is there)
  std::string path;  // the document
  std::string log;   // what kernel-ref.sh said, for a failure's message
};

// Runs `scripts/kernel-ref.sh --bql 10,40,dynamic` the first time it is called (with the
// constants above, into a scratch folder of this process) and returns that run ever after.
// TXBATCH_KERNEL_REF=FILE takes FILE, a document the script wrote before, instead of booting
// guests (to work on the comparison, or to show it fails on a wrong model, in seconds).
const KernelReferenceRun& KernelReferenceUdp();

}  // namespace txbatch::test
