#pragma once
// Whether a sentence a case checks says (or leaves out) a phrase, as an assertion that prints
// the sentence when it fails: EXPECT_TRUE(Says(advice.reason, "batch 16")).

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace txbatch::test {

inline ::testing::AssertionResult Says(std::string_view text, std::string_view phrase) {
  if (text.find(phrase) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not say \"" << phrase << "\"";
}

inline ::testing::AssertionResult DoesNotSay(std::string_view text, std::string_view phrase) {
  if (text.find(phrase) == std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" says \"" << phrase << "\"";
}

}  // namespace txbatch::test
