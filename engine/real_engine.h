#pragma once
// One cell of an experiment on the real engine: producers -> qdisc -> batcher -> driver -> wire
// -> sink for one configuration, on threads and the TSC, with warm-up, measured window and drain,
// and the books checked at the end. The cell and its result are cell.h's.

#include <rte_mempool.h>

#include <atomic>
#include <vector>

#include "base/error.h"
#include "engine/cell.h"

namespace txbatch {

// Runs one cell on `pool`. `stop` (a stop signal: SIGINT, SIGTERM, SIGHUP) cuts the measured
// window short; what was measured is still returned with `interrupted` set. Fails when the driver
// cannot be created (with its errno) or a drain does not finish (EIO: a bug). `flow_seq` (may be
// null: every flow starts at 0): flow f's first sequence number (missing entries: 0), updated to
// where it ended.
Result<CellResult> RunCell(const CellConfig& cfg, rte_mempool* pool, double tsc_hz,
                           const std::vector<int>& cpus, const std::atomic<bool>& stop,
                           std::vector<uint64_t>* flow_seq = nullptr);

}  // namespace txbatch
