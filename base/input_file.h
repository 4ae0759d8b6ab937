#pragma once
// Files txbatch reads as input (`report FILE`, `--cost-model FILE`): whole regular files of a
// bounded size. Anything else — a directory, a FIFO, a device such as /dev/zero, a file past
// the bound — is bad input, one sentence, before a byte of it is parsed.

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace txbatch {

// The largest result document `report` reads: a long sweep's records are a few MiB, so this is
// a typo's or a device's size, not a document's.
inline constexpr uint64_t kMaxResultFileBytes = 256ull << 20;
// The largest cost model read: calibrate writes about 2 KB.
inline constexpr uint64_t kMaxCostModelFileBytes = 1ull << 20;

// The whole of the regular file `path`, at most `max_bytes` of it (files whose size the kernel
// does not report, as in /proc, are read up to the bound). `what` names the input in messages
// ("--cost-model", "result file"); `valid` says what would be accepted ("a JSON file as txbatch
// calibrate writes"). Never blocks on a FIFO.
Result<std::string> ReadInputFile(const std::string& path, std::string_view what,
                                  uint64_t max_bytes, std::string_view valid);

}  // namespace txbatch
