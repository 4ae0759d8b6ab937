#pragma once
// JSON documents as txbatch writes them for people and programs alike (--json, results.json):
// indented, with arrays of numbers kept on one line.

#include <nlohmann/json.hpp>
#include <string>

namespace txbatch {

// `doc` indented as nlohmann's dump(2), but a non-empty array of numbers, booleans or nulls on
// one line: a latency histogram's [lo_ns, hi_ns, count] bins took five lines each, ~30 KB a
// record. Parsed, it is `doc`; ends with a newline. Bad UTF-8 in a string is replaced, not thrown.
std::string DumpDocument(const nlohmann::json& doc);

}  // namespace txbatch
