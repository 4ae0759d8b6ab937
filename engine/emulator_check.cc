#include "engine/emulator_check.h"

#include <fmt/format.h>

#include <algorithm>

#include "dataplane/tx_driver.h"

namespace txbatch {

EmulatorCheck CheckEmulator(const EmulatorCheckInput& in) {
  EmulatorCheck c;
  if (in.window_s <= 0) return c;
  std::vector<std::string> why;
  // The producer furthest below its pace that nothing held back (a full qdisc excuses every
  // producer: which one waited is not counted apart).
  std::optional<size_t> short_one;
  double short_share = 1;
  const size_t n = std::min(in.offered_pps.size(), in.producers.size());
  for (size_t i = 0; i < n; ++i) {
    if (in.offered_pps[i] <= 0) continue;
    const double offered = in.offered_pps[i] * in.window_s;
    const double share = static_cast<double>(in.producers[i].generated) / offered;
    c.least_rate_share = std::min(c.least_rate_share.value_or(share), share);
    // Held back by the stack, or by the model: its costs alone leave no room for the pace.
    const double on_queue =
        i < in.queue_offered_pps.size() ? in.queue_offered_pps[i] : in.offered_pps[i];
    const bool held = in.producers[i].held > 0 || in.queue_waits > 0 ||
                      in.modelled_ns_per_frame * on_queue >= 1e9 * (1 - kRateShortfall);
    const double missing = offered - static_cast<double>(in.producers[i].generated);
    if (!held && missing > std::max(kRateShortfall * offered, kRateSlackFrames) &&
        share < short_share)
      short_one = i, short_share = share;
  }
  if (short_one) {
    const size_t i = *short_one;
    why.push_back(fmt::format(
        "producer {} made {:.4g} of the {:.4g} Mpps it was offered ({:.2f} %) with nothing "
        "holding it back: its CPU, not the device or link, set the rate",
        i, static_cast<double>(in.producers[i].generated) / in.window_s / 1e6,
        in.offered_pps[i] / 1e6, 100 * short_share));
  }
  const double window_us = in.window_s * 1e6;
  if (in.wire_stalled_us >= kStalledShare * window_us && in.wire_max_idle_us >= kHostStallS * 1e6 &&
      in.irq_max_late_us >= 0.5 * in.wire_max_idle_us)
    why.push_back(fmt::format(
        "the wire sat idle {:.1f} ms of the {:.0f} ms window in stalls of {:.0f} ms or more, the "
        "longest {:.1f} ms while the txirq was served {:.1f} ms late: the machine, not the model, "
        "idled it",
        in.wire_stalled_us / 1e3, window_us / 1e3, kHostStallS * 1e3, in.wire_max_idle_us / 1e3,
        in.irq_max_late_us / 1e3));
  c.bound = !why.empty();
  c.why = fmt::format("{}", fmt::join(why, "; and "));
  return c;
}

}  // namespace txbatch
