#pragma once
// `txbatch report`: what a --json file holds, printed as the command that wrote it printed it;
// with --out, a sweep's files and figures written from it.

#include <string>

namespace txbatch {

int ReportCommand(const std::string& path, const std::string& out_dir);

}  // namespace txbatch
