// Every text option a user writes: the first byte picks the parser, the rest is the text —
// driver specs and devargs (emu, ethdev, verbs), --policy, --rate, --link (netem's words),
// option lists (--batch, --procs, --queues), a cost-model file, durations (--p99-max), IPv4
// addresses (respond --ip) and --eal-memory.
#include <arpa/inet.h>

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/units.h"
#include "batching/flush_policy.h"
#include "dataplane/link_spec.h"
#include "dataplane/producer.h"
#include "dataplane/responder.h"
#include "drivers/factory.h"
#include "engine/cost_model_file.h"
#include "tools/run_options.h"
#include "tools/tune.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace txbatch;
  if (size == 0 || size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 9) {
    case 0: {
      if (auto spec = ParseDriverSpec(text)) (void)spec->ToString();
      break;
    }
    case 1: {
      if (auto p = ParsePolicySpec(text)) (void)p->ToString();
      break;
    }
    case 2: {
      if (auto r = ParseRate(text)) (void)r->ToString();
      break;
    }
    case 3: {
      // A parsed link prints back into words that parse to the same link.
      if (auto l = ParseLinkSpec(text)) {
        auto again = ParseLinkSpec(l->ToString());
        if (!again) __builtin_trap();
      }
      break;
    }
    case 4:
      (void)ParseUnsignedList("--batch", text, 1, kMaxBatch);
      break;
    case 5: {
      const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (!doc.is_discarded()) (void)CostModelFromJson(doc, "fuzz");
      break;
    }
    case 6: {
      // An accepted time is a finite number of nanoseconds, 0 or more; a rate finite and above 0.
      if (auto ns = ParseTimeNs("f", text, kUsNs); ns && !(std::isfinite(*ns) && *ns >= 0))
        __builtin_trap();
      if (auto bps = ParseBitRate("f", text, true); bps && !(std::isfinite(*bps) && *bps > 0))
        __builtin_trap();
      if (auto pps = ParsePacketRate("f", text); pps && !(std::isfinite(*pps) && *pps > 0))
        __builtin_trap();
      break;
    }
    case 7: {
      // An accepted address prints back into a dotted quad that parses to the same address.
      if (auto ip = ParseIpv4(text)) {
        char back[INET_ADDRSTRLEN];
        const in_addr a{*ip};
        if (!inet_ntop(AF_INET, &a, back, sizeof back)) __builtin_trap();
        auto again = ParseIpv4(back);
        if (!again || *again != *ip) __builtin_trap();
      }
      break;
    }
    case 8: {
      // Only the three words are accepted.
      if (ParseEalMemory(text) && text != "auto" && text != "no-huge" && text != "in-memory")
        __builtin_trap();
      break;
    }
  }
  return 0;
}
