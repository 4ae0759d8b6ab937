#pragma once
// What the e2e cases share beside RunTxbatch (tests/txbatch_run.h: the real binary, its own EAL
// per run, its JSON records read back): EAL arguments, and the checks every record must pass.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/txbatch_run.h"

namespace txbatch::test {

// The run ended with exit status 0 and wrote `cells` records (one per cell; --rounds 1); if not,
// its status, record count, stderr and stdout: ASSERT_TRUE(WroteCells(run, 2)).
::testing::AssertionResult WroteCells(const TxbatchRun& run, size_t cells);

// The results of the run's record `i` (its cells in the order txbatch runs them).
const nlohmann::json& Results(const TxbatchRun& run, size_t i);

// One record as the checks read it: the record, its results, their books, and its config as
// text for failure messages.
struct Cell {
  const nlohmann::json& rec;
  const nlohmann::json& r;  // rec["results"]
  const nlohmann::json& a;  // r["accounting"]
  std::string cell;         // rec["config"].dump()
};

// The run's records in order, each as a Cell: for (const auto& [rec, r, a, cell] : Cells(run)).
std::vector<Cell> Cells(const TxbatchRun& run);

// RunTxbatch, and the seconds it took on the wall clock (EAL start-up, every cell, the drains).
TxbatchRun RunTxbatchTimed(const std::string& args, double* wall_s);

// EAL arguments given the way a user gives them (after " -- ", replacing txbatch's defaults),
// for a run that touches no hugepages and no other process: its files under `file_prefix`.
std::string UserEalArgs(const std::string& file_prefix);

// For a run on a port where nothing receives: checks that every record's books balance and that
// it counted where the driver accepts frames; returns each record's `sent`, in order.
std::vector<uint64_t> SentByDriverCountedRecords(const nlohmann::json& doc);

// One record's books closed: balanced, every mbuf home, nothing left queued (the drain ended).
void ExpectBooksClosed(const nlohmann::json& rec);

// The books closed, and every frame sent arrived exactly once: none lost, none duplicated (a
// loopback or an emulated wire without a link).
void ExpectDeliveredOnce(const nlohmann::json& rec);

// Every drop has a reason (the reasons add up to drops_total), and the pool never ran dry.
void ExpectDropsHaveReasons(const nlohmann::json& rec);

// Free hugepages can hold an in-memory EAL run of the test size, and ulimit -f a hugepage file.
bool HugepagesAvailable();

}  // namespace txbatch::test
