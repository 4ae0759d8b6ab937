#pragma once
// A record's `results` object (DESIGN.md "Result records"), written and read back from one
// table of its fields: each field once, with where it sits in the object, how it is written,
// how it is read and whether a record may lack it (one written before the field existed).
// records.cc writes whole records with ResultJson, record_reader.cc reads them with ResultFrom.

#include <nlohmann/json.hpp>

#include "engine/record.h"

namespace txbatch {

nlohmann::json ResultJson(const CellResult& r);
// Throws a json exception (the document is incomplete or not txbatch's) naming what is wrong.
CellResult ResultFrom(const nlohmann::json& results);

}  // namespace txbatch
