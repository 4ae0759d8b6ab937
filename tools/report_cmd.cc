// `txbatch report` (report_cmd.h).
#include "tools/report_cmd.h"

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "base/output_file.h"
#include "results/record_reader.h"
#include "results/summary.h"
#include "results/sweep.h"
#include "results/tables.h"
#include "tools/compare.h"
#include "tools/figures.h"
#include "tools/session.h"

namespace txbatch {

int ReportCommand(const std::string& path, const std::string& out_dir) {
  std::optional<OutputDir> out;
  if (!out_dir.empty()) {
    auto d = OutputDir::Check(out_dir);
    if (!d) return Fail(kExitBadInput, d.error());
    out = *d;
  }
  auto back = ReadResults(path);
  if (!back) return Fail(kExitBadInput, back.error());
  const bool comparison = !back->comparison.is_null() && back->cells.size() == 2;
  if (out && comparison)
    return Fail(kExitBadInput,
                Error{EINVAL, fmt::format("report --out writes a sweep's tables, CSV and plots "
                                          "against batch size, and '{}' holds a comparison of "
                                          "two configurations; valid: --out with a file that "
                                          "run, sweep or tune wrote (txbatch-plot FILE --out "
                                          "DIR draws a comparison)",
                                          path)});
  PrintHeader(stdout, back->cells, back->env);
  bool balanced = true;
  for (const auto& rec : back->records) balanced &= rec.result.books.balanced;
  if (comparison) {
    std::vector<CellResult> ra, rb;
    for (const auto& rec : back->records) (rec.side == "B" ? rb : ra).push_back(rec.result);
    const std::string axis = back->comparison.value("axis", std::string("--batch/--policy"));
    PrintComparison(stdout, axis, back->cells[0], back->cells[1], ra, rb, CompareMetrics(ra, rb));
    for (const std::string& c : ComparisonChecks(back->cells[0], back->cells[1], ra, rb))
      std::printf("note: %s\n", c.c_str());
  } else {
    const std::string tables = PrintAndKeepTables(back->records, back->policies);
    if (out) {
      if (Status s = WriteSweepOutputs(*out, tables, std::move(back->document),
                                       Summarise(back->records, back->policies.front()));
          !s)
        return Fail(kExitBadInput, s.error());
      SayWrittenAndDraw(out_dir);
    }
  }
  return balanced ? kExitOk : kExitUnbalanced;
}

}  // namespace txbatch
