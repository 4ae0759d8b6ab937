#pragma once
// Reads back a result document that `txbatch run`, `compare` or `sweep` wrote (--json), so
// `txbatch report` re-renders its tables and plots without re-running anything.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/record.h"

namespace txbatch {

struct ReadBack {
  std::vector<CellRecord> records;   // in file order; `cell` numbers configurations by first use
  std::vector<CellConfig> cells;     // each configuration once, in order of first use
  std::vector<PolicySpec> policies;  // each policy once, in order of first use
  RunEnv env;                        // from the first record (pinning: the one with most procs)
  nlohmann::json comparison;         // a compare document's `comparison`, else null
  nlohmann::json document;           // the whole document as read (report --out rewrites it)
};

// The deepest nesting of arrays and objects a result document may have. txbatch's own reach 6
// (records[].results.per_flow[].latency_ns, comparison.metrics[].ci95); 64 leaves room for
// fields to come, and stays far under the 1000 frames Python's json module recurses through, so
// tools/txbatch-plot (which mirrors these rules) refuses exactly what report refuses.
inline constexpr int kMaxResultDepth = 64;

// Bad or foreign input gets one sentence naming the file and what is wrong with it; the file
// must be a regular one of at most kMaxResultFileBytes (input_file.h), JSON (no NaN, Infinity or
// number past a double's range) nested at most kMaxResultDepth deep. Strings from the document
// that report prints (names, the environment, the comparison) come back with control characters
// escaped (\xNN, \u00NN): a document cannot drive the terminal. tools/txbatch-plot reads by
// the same rules; change both.
Result<ReadBack> ReadResults(const std::string& path);
// The same from the document's text; `path` names it in messages.
Result<ReadBack> ParseResults(std::string_view text, std::string_view path);

}  // namespace txbatch
