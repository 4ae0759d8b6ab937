#pragma once
// A link's impairments in netem's own words (`--link "delay 3ms 1ms 25% distribution normal loss
// random 1% …"`, tc-netem(8)), parsed into one struct. The model that applies them is
// link_model.h; this file is only the language. Words txbatch does not model are an error that
// names them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace txbatch {

// iproute2's delay distribution tables (normal.dist, pareto.dist, paretonormal.dist): Debian's
// iproute2 package ships them here.
inline constexpr const char* kNetemDistDir = "/usr/lib/x86_64-linux-gnu/tc";

struct LinkSpec {
  // delay TIME [JITTER [CORRELATION]] [distribution NAME]
  double delay_ns = 0, jitter_ns = 0, delay_corr = 0;
  std::string distribution = "uniform";  // uniform (no table), normal, pareto, paretonormal
  std::vector<int16_t> dist_table;       // the loaded table (scaled by kNetemDistScale)
  // loss random P [CORR] | loss state p13 [p31 [p32 [p23 [p14]]]] | loss gemodel p [r [1-h [1-k]]]
  enum class Loss { kNone, kRandom, kState, kGemodel } loss = Loss::kNone;
  double loss_p = 0, loss_corr = 0;
  double p13 = 0, p31 = 1, p32 = 0, p23 = 1, p14 = 0;  // loss state (tc-netem defaults)
  double ge_p = 0, ge_r = 1, ge_1h = 1, ge_1k = 0;     // loss gemodel (tc-netem defaults)
  // duplicate P [CORR]; reorder P [CORR] [gap N]; corrupt P [CORR]
  double duplicate = 0, duplicate_corr = 0;
  double reorder = 0, reorder_corr = 0;
  unsigned gap = 0;
  double corrupt = 0, corrupt_corr = 0;
  // rate RATE [PACKETOVERHEAD]: a bottleneck after the wire, bytes + overhead per frame
  double rate_bps = 0;
  int rate_overhead = 0;
  uint64_t seed = 1;      // same seed, same fates
  unsigned limit = 1000;  // frames the link may hold (netem's default); more are dropped

  bool Active() const;           // anything at all to do
  // The longest a frame of `frame_bytes` can stay in the link: the delay with the widest jitter
  // its distribution gives, behind a full queue (`limit` frames) at `rate`. A drain waits this
  // long for what the link holds.
  double MaxHoldS(unsigned frame_bytes) const;
  // What to change when MaxHoldS is too long: the part of it that dominates, in words.
  std::string HoldAdvice(unsigned frame_bytes) const;
  std::string ToString() const;  // back in netem's words, every value explicit
};

// The longest a run waits after its window for the frames its link holds (MaxHoldS): a link
// that may hold one longer is refused up front rather than drained for hours.
inline constexpr double kMaxLinkHoldS = 2 * 3600;

// NETEM_DIST_SCALE: table entries are multiples of sigma scaled by this.
inline constexpr int kNetemDistScale = 8192;

// Parses netem words; `dist_dir` holds iproute2's *.dist tables. Bad input: one sentence naming
// the word and what is valid.
Result<LinkSpec> ParseLinkSpec(std::string_view text, const std::string& dist_dir = kNetemDistDir);

}  // namespace txbatch
