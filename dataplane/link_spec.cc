#include "dataplane/link_spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "base/units.h"

namespace txbatch {
namespace {

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A number strtod reads in full precision: one it can only round to 0 or infinity (ERANGE:
// 1e-400ms would be a zero delay, accepted as if meant) is none.
std::optional<double> Number(const std::string& s, size_t* used = nullptr) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || errno == ERANGE) return std::nullopt;
  if (used) *used = static_cast<size_t>(end - s.c_str());
  return v;
}

// A whole number in [lo, hi], the whole word: gap, seed and limit land in integer fields, so
// anything a conversion cannot hold (6.7e17 as a gap, 1e30 as a seed) is refused here.
std::optional<double> Whole(const std::vector<std::string>& w, size_t i, double lo, double hi) {
  size_t used = 0;
  const auto n = i < w.size() ? Number(w[i], &used) : std::nullopt;
  if (!n || used != w[i].size() || *n != std::floor(*n) || *n < lo || *n > hi) return std::nullopt;
  return n;
}

constexpr double kMaxTimeNs = 3600e9;  // an hour: longer is a typo, and stays finite in cycles

// "3ms", "100us", "1s", "500ns", "2" (netem: a bare number is microseconds); at most an hour.
std::optional<double> TimeNs(const std::string& s) {
  auto ns = ParseTimeNs("--link", s, kUsNs);
  if (!ns || *ns > kMaxTimeNs) return std::nullopt;
  return *ns;
}

// "1%", "0.5%", "25": a percentage as a fraction.
std::optional<double> Percent(const std::string& s) {
  size_t used = 0;
  const auto v = Number(s, &used);
  const std::string rest = s.substr(used);
  if (!v || *v < 0 || *v > 100 || !(rest.empty() || rest == "%")) return std::nullopt;
  return *v / 100;
}

bool IsPercent(const std::string& s) { return Percent(s).has_value(); }

// "100mbit", "1gbit", "500kbit", "10mbps" (bytes), "1000bit", "1000" (bits); 1 bit/s to 10
// Tbit/s (a frame's time on the wire stays finite).
std::optional<double> RateBps(const std::string& s) {
  auto bps = ParseBitRate("--link", s, true);
  if (!bps || *bps < 1 || *bps > 1e13) return std::nullopt;
  return *bps;
}

Result<std::vector<int16_t>> LoadDist(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name + ".dist";
  std::ifstream in(path);
  if (!in)
    return MakeError(ENOENT, fmt::format("--link distribution {}: cannot read {} (iproute2 ships "
                                         "it; is the iproute2 package installed?)",
                                         name, path));
  std::vector<int16_t> table;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) continue;
    std::istringstream ls(line);
    for (long v; ls >> v;) table.push_back(static_cast<int16_t>(v));
  }
  if (table.empty())
    return MakeError(EINVAL, fmt::format("--link distribution {}: {} holds no table", name, path));
  return table;
}

// A value in the largest unit it is a whole number of (10ms, 1500us, 10gbit), else in the
// smallest, with every digit the double holds: words that parse back to the same value.
std::string InUnits(double v, std::initializer_list<std::pair<const char*, double>> units) {
  for (const auto& [name, scale] : units)
    if (const double q = v / scale; q >= 1 && q == std::floor(q) && q * scale == v && q < 1e15)
      return fmt::format("{}{}", static_cast<uint64_t>(q), name);
  return fmt::format("{}{}", v, std::data(units)[units.size() - 1].first);
}

std::string TimeWords(double ns) {
  if (ns == 0) return "0ms";
  return InUnits(ns, {{"s", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"ns", 1}});
}

std::string RateWords(double bps) {
  return InUnits(bps, {{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}});
}

}  // namespace

double LinkSpec::MaxHoldS(unsigned frame_bytes) const {
  // The widest jitter a frame can get: uniform is +-jitter; netem's tables are multiples of
  // sigma, scaled by kNetemDistScale.
  double widest = 1;
  if (!dist_table.empty()) {
    int most = 0;
    for (const int16_t v : dist_table) most = std::max(most, std::abs(int{v}));
    widest = static_cast<double>(most) / kNetemDistScale;
  }
  double s = (delay_ns + widest * jitter_ns) * 1e-9;
  if (rate_bps > 0)
    s += static_cast<double>(limit) * (frame_bytes + std::max(0, rate_overhead)) * 8 / rate_bps;
  return s;
}

std::string LinkSpec::HoldAdvice(unsigned frame_bytes) const {
  LinkSpec queue_only = *this;
  queue_only.delay_ns = queue_only.jitter_ns = 0;
  const double queue_s = queue_only.MaxHoldS(frame_bytes);
  return queue_s >= MaxHoldS(frame_bytes) - queue_s
             ? "a higher rate or a smaller limit (a full queue of the largest frames drains at "
               "the rate)"
             : "a shorter delay or jitter (the widest jitter is the distribution's tail)";
}

bool LinkSpec::Active() const {
  return delay_ns > 0 || jitter_ns > 0 || loss != Loss::kNone || duplicate > 0 || reorder > 0 ||
         corrupt > 0 || rate_bps > 0;
}

std::string LinkSpec::ToString() const {
  std::string s = fmt::format("delay {} {} {:g}% distribution {}", TimeWords(delay_ns),
                              TimeWords(jitter_ns), delay_corr * 100, distribution);
  switch (loss) {
    case Loss::kNone:
      break;
    case Loss::kRandom:
      s += fmt::format(" loss random {:g}% {:g}%", loss_p * 100, loss_corr * 100);
      break;
    case Loss::kState:
      s += fmt::format(" loss state {:g}% {:g}% {:g}% {:g}% {:g}%", p13 * 100, p31 * 100, p32 * 100,
                       p23 * 100, p14 * 100);
      break;
    case Loss::kGemodel:
      s += fmt::format(" loss gemodel {:g}% {:g}% {:g}% {:g}%", ge_p * 100, ge_r * 100, ge_1h * 100,
                       ge_1k * 100);
      break;
  }
  if (duplicate > 0)
    s += fmt::format(" duplicate {:g}% {:g}%", duplicate * 100, duplicate_corr * 100);
  if (reorder > 0) s += fmt::format(" reorder {:g}% {:g}%", reorder * 100, reorder_corr * 100);
  if (gap > 0) s += fmt::format(" gap {}", gap);  // netem prints no gap 0, nor does it parse one
  if (corrupt > 0) s += fmt::format(" corrupt {:g}% {:g}%", corrupt * 100, corrupt_corr * 100);
  if (rate_bps > 0) s += fmt::format(" rate {} {}", RateWords(rate_bps), rate_overhead);
  return s + fmt::format(" seed {} limit {}", seed, limit);
}

Result<LinkSpec> ParseLinkSpec(std::string_view text, const std::string& dist_dir) {
  const std::vector<std::string> w = Words(text);
  LinkSpec l;
  size_t i = 0;
  const auto bad = [&](const std::string& what) {
    return MakeError(EINVAL, fmt::format("--link: {}; valid words: delay TIME [JITTER [CORR%]] "
                                         "[distribution uniform|normal|pareto|paretonormal], "
                                         "loss random P% [CORR%] | loss state p13 [p31 [p32 [p23 "
                                         "[p14]]]] | loss gemodel p [r [1-h [1-k]]], duplicate P% "
                                         "[CORR%], reorder P% [CORR%] [gap N], corrupt P% [CORR%], "
                                         "rate RATE [OVERHEAD], seed N, limit N",
                                         what));
  };
  const auto next_is = [&](auto pred) { return i < w.size() && pred(w[i]); };
  const auto percents = [&](std::initializer_list<double*> outs) {
    for (double* out : outs) {
      if (!next_is(IsPercent)) break;
      *out = *Percent(w[i++]);
    }
  };
  if (w.empty()) return bad("no words were given");
  bool dist_named = false;
  while (i < w.size()) {
    const std::string word = w[i++];
    if (word == "delay" || word == "latency") {
      if (!next_is([](const std::string& s) { return TimeNs(s).has_value(); }))
        return bad(
            fmt::format("delay needs a time up to an hour ({}; a bare number is microseconds)",
                        kTimeUnitsSentence));
      l.delay_ns = *TimeNs(w[i++]);
      if (next_is([](const std::string& s) { return TimeNs(s).has_value(); }))
        l.jitter_ns = *TimeNs(w[i++]);
      percents({&l.delay_corr});
    } else if (word == "distribution") {
      if (i >= w.size()) return bad("distribution needs a name");
      l.distribution = w[i++];
      dist_named = true;
    } else if (word == "loss" || word == "drop") {
      if (next_is([](const std::string& s) { return s == "random"; })) ++i;
      if (next_is([](const std::string& s) { return s == "state"; })) {
        ++i;
        l.loss = LinkSpec::Loss::kState;
        if (!next_is(IsPercent)) return bad("loss state needs p13");
        l.p13 = *Percent(w[i++]);
        l.p31 = 1 - l.p13;  // tc-netem(8): a Bernoulli model when only p13 is given
        percents({&l.p31, &l.p32, &l.p23, &l.p14});
      } else if (next_is([](const std::string& s) { return s == "gemodel"; })) {
        ++i;
        l.loss = LinkSpec::Loss::kGemodel;
        if (!next_is(IsPercent)) return bad("loss gemodel needs p");
        l.ge_p = *Percent(w[i++]);
        l.ge_r = 1 - l.ge_p;  // tc-netem(8) defaults
        percents({&l.ge_r, &l.ge_1h, &l.ge_1k});
      } else {
        if (!next_is(IsPercent)) return bad("loss needs a percentage (e.g. loss random 1%)");
        l.loss = LinkSpec::Loss::kRandom;
        l.loss_p = *Percent(w[i++]);
        percents({&l.loss_corr});
      }
    } else if (word == "duplicate") {
      if (!next_is(IsPercent)) return bad("duplicate needs a percentage");
      l.duplicate = *Percent(w[i++]);
      percents({&l.duplicate_corr});
    } else if (word == "reorder") {
      if (!next_is(IsPercent)) return bad("reorder needs a percentage");
      l.reorder = *Percent(w[i++]);
      percents({&l.reorder_corr});
    } else if (word == "gap") {
      const auto n = Whole(w, i, 1, 4294967295.0);  // netem's gap is a u32
      if (!n) return bad("gap needs a count 1..4294967295");
      l.gap = static_cast<unsigned>(*n);
      ++i;
    } else if (word == "corrupt") {
      if (!next_is(IsPercent)) return bad("corrupt needs a percentage");
      l.corrupt = *Percent(w[i++]);
      percents({&l.corrupt_corr});
    } else if (word == "rate") {
      if (!next_is([](const std::string& s) { return RateBps(s).has_value(); }))
        return bad(
            fmt::format("rate needs a rate from 1bit to 10tbit ({}; a bare number is bits/s)",
                        kBitRateUnitsSentence));
      l.rate_bps = *RateBps(w[i++]);
      size_t used = 0;
      if (i < w.size()) {
        const auto o = Number(w[i], &used);
        if (o && used == w[i].size() && *o == std::floor(*o) && std::fabs(*o) < 65536) {
          l.rate_overhead = static_cast<int>(*o);
          ++i;
        }
      }
    } else if (word == "seed") {
      // Doubles hold whole numbers exactly up to 2^53; a seed is a name, not a quantity.
      const auto n = Whole(w, i, 0, 9007199254740992.0);
      if (!n) return bad("seed needs a whole number 0..9007199254740992");
      l.seed = static_cast<uint64_t>(*n);
      ++i;
    } else if (word == "limit") {
      const auto n = Whole(w, i, 1, 1e6);
      if (!n) return bad("limit needs 1..1000000");
      l.limit = static_cast<unsigned>(*n);
      ++i;
    } else {
      return bad(fmt::format("'{}' is not a netem word txbatch models", word));
    }
  }
  if (l.gap > 0 && l.reorder == 0) l.reorder = 1;  // netem: a gap alone means reorder 100%
  if (l.reorder > 0 && l.delay_ns == 0)
    return bad("reorder needs a delay to reorder against (netem sends the others after it)");
  if (dist_named && l.distribution != "uniform") {
    if (l.distribution != "normal" && l.distribution != "pareto" &&
        l.distribution != "paretonormal")
      return bad(fmt::format("distribution '{}' is not one txbatch loads", l.distribution));
    auto table = LoadDist(dist_dir, l.distribution);
    if (!table) return table.error();
    l.dist_table = std::move(*table);
  }
  return l;
}

}  // namespace txbatch
