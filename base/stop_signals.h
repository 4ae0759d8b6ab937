#pragma once
// The signals that stop a txbatch command cleanly (its window ends, the drain runs, what was
// measured is printed and written, EAL's runtime folder removed). SIGHUP is one of them: a
// terminal that closes, or an ssh session that drops, sends it, and it asks the same as SIGTERM —
// stop — so it is taken the same way wherever SIGTERM is (a SIGHUP that killed a run lost its
// books, its --json and its runtime folder).

#include <array>
#include <csignal>

namespace txbatch {

inline constexpr std::array<int, 3> kStopSignals = {SIGINT, SIGTERM, SIGHUP};

}  // namespace txbatch
