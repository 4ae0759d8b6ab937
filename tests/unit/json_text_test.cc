// Result documents are written indented as nlohmann's dump(2) with arrays of numbers on one line
// (a latency histogram's bins took five lines each), and read back as the same document.
#include "base/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace txbatch {
namespace {

using nlohmann::json;

TEST(DumpDocument, ArraysOfNumbersTakeOneLineAndEverythingElseIsDumpTwo) {
  const json bins = {{"bins", {{1, 2, 3}, {2, 4, 5}}}};
  EXPECT_EQ(DumpDocument(bins), "{\n  \"bins\": [\n    [1, 2, 3],\n    [2, 4, 5]\n  ]\n}\n");
  EXPECT_EQ(DumpDocument(json{{"x", {0.1, -2, true, nullptr}}}),
            "{\n  \"x\": [0.1, -2, true, null]\n}\n");
  // Without such arrays the text is nlohmann's own.
  const json plain = {{"name", "a>b \"quoted\" \u00e9"},
                      {"empty_array", json::array()},
                      {"empty_object", json::object()},
                      {"nested", {{"k", 1.5}, {"names", {"x", "y"}}, {"objs", {{{"a", 1}}}}}},
                      {"n", nullptr}};
  EXPECT_EQ(DumpDocument(plain), plain.dump(2) + "\n");
}

TEST(DumpDocument, ReadsBackAsTheSameDocument) {
  const json doc = {
      {"records",
       {{{"config", {{"batch", 32}, {"sizes", {64, 1500}}, {"drivers", {"emu:e1000"}}}},
         {"results",
          {{"mpps", 1.234567890123},
           {"latency_hist_ns", {{"min", 10}, {"max", 99}, {"bins", {{8, 16, 3}, {64, 128, 1}}}}},
           {"mixed", {1, "two", {{"three", 3}}, json::array({4, 5})}}}}}}},
      {"schema_version", 1}};
  EXPECT_EQ(json::parse(DumpDocument(doc)), doc);
}

}  // namespace
}  // namespace txbatch
