#pragma once
// Runs the real txbatch binary (its own EAL per run) and reads its JSON records back.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace txbatch::test {

struct TxbatchRun {
  int status = -1;
  std::string out, err;
  nlohmann::json doc;  // the --json file, or null when none was written
};

// `args` go after "txbatch"; a --json file in the test's temp dir is added, and `run` gets
// --rounds 1 unless `args` set it (one record per cell); `report` gets no --json.
TxbatchRun RunTxbatch(const std::string& args);

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

// Free hugepages can hold an in-memory EAL run of the test size, and ulimit -f a hugepage file.
bool HugepagesAvailable();

}  // namespace txbatch::test
