#include "base/json_text.h"

#include <algorithm>

namespace txbatch {
namespace {

std::string Scalar(const nlohmann::json& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// dump(2)'s layout, member by member, but for the one-line arrays.
void Dump(const nlohmann::json& j, size_t indent, std::string& out) {
  if (!j.is_structured() || j.empty()) {
    out += Scalar(j);
    return;
  }
  if (j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) {
        return !v.is_structured() && !v.is_string();
      })) {
    out += '[';
    for (size_t i = 0; i < j.size(); ++i) out += (i ? ", " : "") + Scalar(j[i]);
    out += ']';
    return;
  }
  out += j.is_array() ? "[\n" : "{\n";
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out += ",\n";
    first = false;
    out.append(indent + 2, ' ');
    if (j.is_object()) out += Scalar(nlohmann::json(it.key())) + ": ";
    Dump(*it, indent + 2, out);
  }
  out += '\n';
  out.append(indent, ' ');
  out += j.is_array() ? ']' : '}';
}

}  // namespace

std::string DumpDocument(const nlohmann::json& doc) {
  std::string out;
  Dump(doc, 0, out);
  out += '\n';
  return out;
}

}  // namespace txbatch
