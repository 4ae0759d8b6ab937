#pragma once
// The figures of `sweep --out DIR` and `report FILE --out DIR`: txbatch-plot (Python 3 and
// matplotlib, tools/txbatch-plot) run on DIR once its results.json is written. The program sits
// beside the binary (installed or in the build tree); TXBATCH_PLOT names another, or, empty,
// none. Figures are an extra: without them the data files stand, and the command's exit status
// is the measurement's.

#include <string>
#include <vector>

namespace txbatch {

struct Figures {
  std::vector<std::string> files;  // what it drew (figures.json last), empty if nothing
  std::string why_not;             // one sentence where nothing was drawn
};

Figures DrawFigures(const std::string& dir);

// After WriteSweepOutputs: says on stdout what it wrote in `dir`, draws the figures and says
// what they are there too — or, on stderr, why there are none.
void SayWrittenAndDraw(const std::string& dir);

}  // namespace txbatch
