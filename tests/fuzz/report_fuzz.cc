// `txbatch report FILE`: a result document from anywhere, read back and rendered as the
// tables, the CSV and the summary JSON.
#include <cstdint>
#include <cstdio>
#include <string_view>

#include "results/record_reader.h"
#include "results/summary.h"
#include "results/sweep.h"
#include "results/tables.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace txbatch;
  if (size > 1 << 16) return 0;
  auto back = ParseResults(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!back) return 0;
  static std::FILE* null = std::fopen("/dev/null", "w");
  PrintTables(null, back->records, back->policies);
  const auto rows = Summarise(back->records, back->policies.front());
  (void)SweepCsv(rows);
  (void)SweepSummaryJson(rows);
  return 0;
}
