#include "drivers/factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <type_traits>

namespace txbatch {

namespace {

// The entry of DriverKinds whose Options are `O`.
template <class O, class Kinds>
struct KindOfOptions;
template <class O, class K, class... Rest>
struct KindOfOptions<O, std::tuple<K, Rest...>>
    : std::conditional_t<std::is_same_v<typename K::Options, O>, std::type_identity<K>,
                         KindOfOptions<O, std::tuple<Rest...>>> {};
template <class O>
using KindOf = typename KindOfOptions<std::remove_cvref_t<O>, DriverKinds>::type;

// A driver's parsed options as a DriverSpec, or its parser's sentence.
template <class Options>
Result<DriverSpec> Spec(Result<Options> o) {
  if (!o) return o.error();
  return DriverSpec{std::move(*o)};
}

// f(std::type_identity<K>{}) for every entry K of DriverKinds, in order.
template <class F>
void ForEachKind(F&& f) {
  [&]<class... K>(std::tuple<K...>*) { (f(std::type_identity<K>{}), ...); }(
      static_cast<DriverKinds*>(nullptr));
}

// Whether K has an RX half a command can receive from.
template <class K>
constexpr bool kReceives = requires(std::string_view t) { K::ParseReceiver(t); };

// Whether a spec no driver's prefix claims is K's (bare devargs: ethdev's).
template <class K>
consteval bool TakesBareDevargs() {
  if constexpr (requires { K::kBareDevargs; })
    return K::kBareDevargs;
  else
    return false;
}
template <class K>
constexpr bool kTakesBareDevargs = TakesBareDevargs<K>();

// What K's users write: its Usage where it has one (emu's models in one phrase), else its forms.
template <class K>
std::vector<std::string> UsageOf() {
  if constexpr (requires { K::Usage(); }) {
    return K::Usage();
  } else {
    std::vector<std::string> usage;
    for (const DriverForm& f : K::Forms()) usage.push_back(f.form);
    return usage;
  }
}

}  // namespace

std::string DriverSpec::ToString() const {
  return std::visit([](const auto& o) { return o.ToString(); }, options);
}

std::string_view DriverSpec::kind() const {
  return std::visit([](const auto& o) { return KindOf<decltype(o)>::kName; }, options);
}

const DriverLimits& DriverSpec::limits() const {
  return std::visit([](const auto& o) -> const DriverLimits& { return KindOf<decltype(o)>::kLimits; },
                    options);
}

unsigned DriverSpec::ring() const {
  return std::visit([](const auto& o) { return KindOf<decltype(o)>::Ring(o); }, options);
}

uint64_t DriverSpec::own_pool_bytes() const {
  return std::visit([](const auto& o) { return KindOf<decltype(o)>::OwnPoolBytes(o); }, options);
}

double DriverSpec::modelled_cost_ns() const {
  return std::visit([](const auto& o) { return KindOf<decltype(o)>::ModelledCostNs(o); }, options);
}

Status DriverSpec::CheckMtu(unsigned mtu) const {
  return std::visit([mtu](const auto& o) { return KindOf<decltype(o)>::CheckMtu(o, mtu); }, options);
}

unsigned DriverSpec::tso_bytes() const {
  return std::visit([](const auto& o) { return KindOf<decltype(o)>::TsoBytes(o); }, options);
}

uint64_t DriverSpec::receiver_pool_bytes(unsigned held) const {
  return std::visit(
      [held](const auto& o) { return KindOf<decltype(o)>::ReceiverPoolBytes(o, held); }, options);
}

std::string DriverForms() {
  std::vector<std::string> usage;
  ForEachKind([&usage]<class K>(std::type_identity<K>) {
    for (std::string& u : UsageOf<K>()) usage.push_back(std::move(u));
  });
  std::string s;
  for (size_t i = 0; i < usage.size(); ++i)
    s += fmt::format("{}{}{}", i == 0 ? "" : "; ", i > 0 && i + 1 == usage.size() ? "or " : "",
                     usage[i]);
  return s;
}

std::string DescribeDrivers() {
  // One column for every form's help, emu's models' included; a form longer than the column
  // has its help on the next line, indented to it.
  constexpr size_t kColumn = 21;
  std::string s;
  ForEachKind([&s]<class K>(std::type_identity<K>) {
    for (const DriverForm& f : K::Forms()) {
      if (f.form.size() + 2 <= kColumn - 2)  // two spaces at least before the help
        s += fmt::format("  {:<{}}{}\n", f.form, kColumn - 2, f.help);
      else
        s += fmt::format("  {}\n  {:<{}}{}\n", f.form, "", kColumn - 2, f.help);
    }
  });
  return s;
}

Result<DriverSpec> ParseDriverSpec(std::string_view text) {
  std::optional<Result<DriverSpec>> parsed;
  ForEachKind([&]<class K>(std::type_identity<K>) {
    for (std::string_view prefix : K::kPrefixes)
      if (!parsed && text.starts_with(prefix)) parsed = Spec(K::Parse(text));
  });
  if (parsed) return std::move(*parsed);
  return MakeError(EINVAL, fmt::format("driver '{}' is unknown; valid: {}", text, DriverForms()));
}

NamedDriver DriverNamedBy(std::string_view text) {
  NamedDriver named{{}, nullptr};
  ForEachKind([&]<class K>(std::type_identity<K>) {
    for (std::string_view prefix : K::kPrefixes)
      if (named.limits == nullptr && text.starts_with(prefix)) named = {K::kName, &K::kLimits};
  });
  return named;
}

Result<DriverSpec> ParseReceiverSpec(std::string_view option, std::string_view text) {
  std::vector<std::string_view> valid;  // the receiving drivers' forms, for the sentence
  ForEachKind([&valid]<class K>(std::type_identity<K>) {
    if constexpr (kReceives<K>) valid.push_back(K::kReceiverForms);
  });
  const auto refuse = [&](std::string_view why) {
    return MakeError(EINVAL, fmt::format("{} {}; valid: {}", option, why, fmt::join(valid, ", or ")));
  };
  if (text.empty()) return refuse("is required");
  std::optional<Result<DriverSpec>> parsed;
  std::string_view without_rx;  // a driver the prefix names that has no RX half
  std::string unavailable;      // the sentence for a driver this build lacks
  ForEachKind([&]<class K>(std::type_identity<K>) {
    for (std::string_view prefix : K::kPrefixes)
      if (!parsed && without_rx.empty() && text.starts_with(prefix)) {
        if constexpr (kReceives<K>) {
          auto o = K::ParseReceiver(text);
          if constexpr (requires { K::Opens(); })
            if (o && !K::Opens())
              unavailable = fmt::format("{} {} cannot open: {}", option, text, K::WhyNot());
          parsed = Spec(std::move(o));
        } else {
          without_rx = K::kName;
        }
      }
  });
  if (!without_rx.empty())
    return refuse(fmt::format("'{}': {} has no receive half to count from", text, without_rx));
  if (!unavailable.empty()) return MakeError(ENOTSUP, unavailable);
  ForEachKind([&]<class K>(std::type_identity<K>) {
    if constexpr (kReceives<K> && kTakesBareDevargs<K>)
      if (!parsed) parsed = Spec(K::ParseReceiver(text));
  });
  if (!parsed) return refuse(fmt::format("'{}' names no driver", text));
  if (!*parsed)
    return MakeError(parsed->error().err, fmt::format("{}: {}", option, parsed->error().message));
  return std::move(*parsed);
}

Result<ReceivePort> OpenReceiver(const DriverSpec& spec, const ReceiveContext& context) {
  return std::visit(
      [&context](const auto& o) -> Result<ReceivePort> {
        using K = KindOf<decltype(o)>;
        if constexpr (kReceives<K>)
          return K::OpenReceiver(o, context);
        else
          return MakeError(EINVAL, fmt::format("{} has no receive half", o.ToString()));
      },
      spec.options);
}

Result<TxDrivers> CreateDrivers(const DriverSpec& spec, rte_mempool* pool, unsigned mtu,
                                std::span<FrameReceiver* const> sinks, const RunWindow& window,
                                double tsc_hz, const LinkSpec* link) {
  const bool linked = link != nullptr && link->Active();
  if (linked && !spec.emulated())
    return MakeError(ENOTSUP, fmt::format("--link puts a link behind the emulated NIC's wire, and "
                                          "{} is not an emulated NIC; valid: --link with emu:MODEL "
                                          "drivers (DPDK ports get links with the bridge)",
                                          spec.ToString()));
  if (sinks.size() > 1 && linked)
    return MakeError(ENOTSUP, fmt::format("--link with --queues {}: the link model sits behind one "
                                          "ring, not a wire shared by several; valid: --queues 1 "
                                          "with --link",
                                          sinks.size()));
  if (sinks.size() > 1 && !spec.limits().one_queue.empty())
    return MakeError(ENOTSUP, fmt::format("--queues {} on {}: {}; valid: --queues 1 with {}",
                                          sinks.size(), spec.ToString(), spec.limits().one_queue,
                                          spec.kind()));
  const DriverContext context{pool, mtu, sinks, window, tsc_hz, link};
  return std::visit([&](const auto& o) { return KindOf<decltype(o)>::Create(o, context); },
                    spec.options);
}

}  // namespace txbatch
