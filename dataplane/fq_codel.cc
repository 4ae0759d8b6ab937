#include "dataplane/fq_codel.h"

#include <fmt/format.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_jhash.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>

#include "base/units.h"
#include "dataplane/gso.h"
#include "dataplane/tsq.h"

namespace txbatch {
namespace {

constexpr unsigned kCodelShift = 10;  // CODEL_SHIFT: codel_time_t is ns >> 10
constexpr unsigned kRecInvSqrtShift = 16;  // REC_INV_SQRT_SHIFT (a u16 rec_inv_sqrt)
// The flow hash's seed: the kernel draws one at boot (hashrnd); a fixed one keeps runs the same.
constexpr uint32_t kFlowHashSeed = 0x66713cd1;

bool Before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }  // codel_time_before
bool After(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }   // codel_time_after
bool AfterEq(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) >= 0; }

// reciprocal_scale: val * ep_ro / 2^32.
uint32_t ReciprocalScale(uint32_t val, uint32_t ep_ro) {
  return static_cast<uint32_t>((static_cast<uint64_t>(val) * ep_ro) >> 32);
}

// codel_Newton_step: rec_inv_sqrt towards 1/sqrt(count), one step.
void NewtonStep(uint32_t count, uint16_t& rec_inv_sqrt) {
  const uint32_t invsqrt = static_cast<uint32_t>(rec_inv_sqrt) << kRecInvSqrtShift;
  const uint32_t invsqrt2 = static_cast<uint32_t>((static_cast<uint64_t>(invsqrt) * invsqrt) >> 32);
  uint64_t val = (3ULL << 32) - static_cast<uint64_t>(count) * invsqrt2;
  val >>= 2;  // avoid overflow in the multiply
  val = (val * invsqrt) >> (32 - 2 + 1);
  rec_inv_sqrt = static_cast<uint16_t>(val >> kRecInvSqrtShift);
}

// codel_control_law: t + interval / sqrt(count).
uint32_t ControlLaw(uint32_t t, uint32_t interval, uint16_t rec_inv_sqrt) {
  return t + ReciprocalScale(interval, static_cast<uint32_t>(rec_inv_sqrt) << kRecInvSqrtShift);
}

// qdisc_pkt_len (qdisc_pkt_len_init): a GSO frame's bytes with each later segment's headers.
uint32_t PktLen(const rte_mbuf* m) {
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  if (!IsGso(m)) return len;
  return len + (WireFrames(m) - 1) * (m->l2_len + m->l3_len + m->l4_len);
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// tc's get_size: a number with b, k/kb, m/mb or g/gb after it (powers of 1024); none is bytes.
bool ParseSize(std::string_view text, uint32_t& out) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr == text.data() || !(v >= 0)) return false;
  const std::string unit = Lower(std::string_view(ptr, text.data() + text.size() - ptr));
  double scale;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "k" || unit == "kb")
    scale = 1024;
  else if (unit == "m" || unit == "mb")
    scale = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb")
    scale = 1024.0 * 1024 * 1024;
  else
    return false;
  const double bytes = v * scale;
  if (bytes > UINT32_MAX) return false;
  out = static_cast<uint32_t>(bytes);
  return true;
}

bool ParseCount(std::string_view text, uint32_t& out, bool packets = false) {
  // tc prints the limit "10240p"; take it back so.
  if (packets && !text.empty() && text.back() == 'p') text.remove_suffix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty();
}

std::string TimeWords(uint32_t us) {
  if (us % 1000000 == 0 && us > 0) return fmt::format("{}s", us / 1000000);
  if (us % 1000 == 0 && us > 0) return fmt::format("{}ms", us / 1000);
  return fmt::format("{}us", us);
}

std::string SizeWords(uint32_t b) {
  if (b % (1u << 20) == 0 && b > 0) return fmt::format("{}Mb", b >> 20);
  if (b % 1024 == 0 && b > 0) return fmt::format("{}Kb", b >> 10);
  return fmt::format("{}b", b);
}

}  // namespace

std::optional<FqCodelParams> ParseFqCodel(std::string_view words, std::string* error) {
  FqCodelParams p;
  std::vector<std::string_view> w;
  for (size_t i = 0; i < words.size();) {
    while (i < words.size() && words[i] == ' ') ++i;
    size_t j = i;
    while (j < words.size() && words[j] != ' ') ++j;
    if (j > i) w.push_back(words.substr(i, j - i));
    i = j;
  }
  constexpr std::string_view kKeys =
      "target, interval, limit, memory_limit, flows, quantum, drop_batch, ecn, noecn";
  const auto fail = [&](std::string msg) {
    *error = std::move(msg);
    return std::nullopt;
  };
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string_view k = w[i];
    if (k == "ecn" || k == "noecn") {
      p.ecn = k == "ecn";
      continue;
    }
    const bool known = k == "target" || k == "interval" || k == "limit" || k == "memory_limit" ||
                       k == "flows" || k == "quantum" || k == "drop_batch";
    if (!known)
      return fail(fmt::format("fq_codel has no parameter '{}'; valid: {}", k, kKeys));
    if (i + 1 >= w.size()) return fail(fmt::format("fq_codel's '{}' needs a value", k));
    const std::string_view v = w[++i];
    bool ok;
    if (k == "target" || k == "interval") {
      uint32_t& f = k == "target" ? p.target_us : p.interval_us;
      // CoDel counts 1024 ns: under 2 us is 0, which drops every frame (target) or never lets
      // the dropping state end (interval).
      // tc's get_time, as every time txbatch reads (base/units.h; a bare number is us), the
      // microseconds truncated as tc's cast does.
      auto ns = ParseTimeNs(k, v, kUsNs);
      ok = ns && *ns / kUsNs <= UINT32_MAX;
      if (ok) f = static_cast<uint32_t>(*ns / kUsNs);
      ok = ok && (uint64_t{f} * 1000 >> kCodelShift) > 0;
      if (!ok)
        return fail(fmt::format(
            "fq_codel's {} must be a time from 2us to 4294s such as 5ms or 5000us (tc's units: "
            "s, ms, us), not '{}'",
            k, v));
      continue;
    }
    if (k == "memory_limit") {
      ok = ParseSize(v, p.memory_limit) && p.memory_limit > 0 &&
           p.memory_limit <= kMaxFqCodelMemoryLimit;
      if (!ok)
        return fail(fmt::format(
            "fq_codel's memory_limit must be a size from 1b to 2gb such as 32Mb (b, kb, mb, "
            "gb), not '{}'",
            v));
      continue;
    }
    uint32_t& f = k == "limit" ? p.limit
                  : k == "flows" ? p.flows
                  : k == "quantum" ? p.quantum
                                   : p.drop_batch;
    ok = ParseCount(v, f, /*packets=*/k == "limit");
    if (k == "flows") ok = ok && f >= 1 && f <= kMaxFqCodelFlows;
    if (k == "limit" || k == "drop_batch") ok = ok && f >= 1;
    // fq_codel_change: below 256 is 256, above FQ_CODEL_QUANTUM_MAX refused.
    if (k == "quantum") ok = ok && f >= 256 && f <= kMaxFqCodelQuantum;
    if (!ok) {
      const char* range = k == "flows"     ? "a whole number from 1 to 65536"
                          : k == "quantum" ? "a whole number of bytes from 256 to 1048576"
                                           : "a whole number from 1 to 4294967295";
      return fail(fmt::format("fq_codel's {} must be {}, not '{}'", k, range, v));
    }
  }
  return p;
}

std::string DescribeFqCodel(const FqCodelParams& p) {
  std::string s = fmt::format("limit {}p flows {}", p.limit, p.flows);
  if (p.quantum != 0) s += fmt::format(" quantum {}", p.quantum);
  s += fmt::format(" target {} interval {} memory_limit {} {} drop_batch {}",
                   TimeWords(p.target_us), TimeWords(p.interval_us), SizeWords(p.memory_limit),
                   p.ecn ? "ecn" : "noecn", p.drop_batch);
  return s;
}

std::string FqCodelChanges(const FqCodelParams& p) {
  const FqCodelParams d;
  std::string s;
  const auto add = [&s](const std::string& words) { s += (s.empty() ? "" : " ") + words; };
  if (p.target_us != d.target_us) add("target " + TimeWords(p.target_us));
  if (p.interval_us != d.interval_us) add("interval " + TimeWords(p.interval_us));
  if (p.limit != d.limit) add(fmt::format("limit {}p", p.limit));
  if (p.flows != d.flows) add(fmt::format("flows {}", p.flows));
  if (p.quantum != d.quantum) add(fmt::format("quantum {}", p.quantum));
  if (p.memory_limit != d.memory_limit) add("memory_limit " + SizeWords(p.memory_limit));
  if (p.ecn != d.ecn) add(p.ecn ? "ecn" : "noecn");
  if (p.drop_batch != d.drop_batch) add(fmt::format("drop_batch {}", p.drop_batch));
  return s.empty() ? s : "(" + s + ")";
}

void FqCodel::Flow::Push(const Entry& e) {
  if (n == ring.size()) {
    std::vector<Entry> bigger(std::max<size_t>(8, ring.size() * 2));
    for (uint32_t i = 0; i < n; ++i) bigger[i] = ring[(head + i) & (ring.size() - 1)];
    ring = std::move(bigger);
    head = 0;
  }
  ring[(head + n) & (ring.size() - 1)] = e;
  ++n;
}

FqCodel::Entry FqCodel::Flow::Pop() {
  const Entry e = ring[head];
  head = (head + 1) & (ring.size() - 1);
  --n;
  return e;
}

FqCodel::FqCodel(const FqCodelParams& params, unsigned psched_mtu, double tsc_hz,
                 QdiscCounters& counters)
    : params_(params),
      quantum_(params.quantum != 0 ? params.quantum : psched_mtu),
      mtu_(psched_mtu),
      target_(static_cast<uint32_t>((static_cast<uint64_t>(params.target_us) * 1000) >> kCodelShift)),
      interval_(
          static_cast<uint32_t>((static_cast<uint64_t>(params.interval_us) * 1000) >> kCodelShift)),
      ns_per_tsc_(1e9 / tsc_hz),
      counters_(counters),
      flows_(params.flows),
      backlogs_(params.flows, 0) {}

uint32_t FqCodel::CodelTime(Tsc t) const {
  return static_cast<uint32_t>(static_cast<uint64_t>(static_cast<double>(t) * ns_per_tsc_) >>
                               kCodelShift);
}

uint32_t FqCodel::Classify(const rte_mbuf* m) const {
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  uint32_t hash;
  if (rte_pktmbuf_data_len(m) >= sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) &&
      eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
    const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(eth + 1);
    uint32_t ports = 0;
    const unsigned l4 = sizeof(rte_ether_hdr) + rte_ipv4_hdr_len(ip);
    if ((ip->next_proto_id == IPPROTO_UDP || ip->next_proto_id == IPPROTO_TCP) &&
        rte_pktmbuf_data_len(m) >= l4 + 4)
      std::memcpy(&ports, rte_pktmbuf_mtod_offset(m, const uint8_t*, l4), 4);
    hash = rte_jhash_3words(ip->src_addr, ip->dst_addr, ports, kFlowHashSeed ^ ip->next_proto_id);
  } else {
    hash = rte_jhash(eth, sizeof(rte_ether_hdr), kFlowHashSeed);
  }
  return ReciprocalScale(hash, params_.flows);
}

bool FqCodel::Enqueue(rte_mbuf* m, int /*band*/, Tsc now) {
  const uint32_t idx = Classify(m);
  Flow& flow = flows_[idx];
  const Entry e{m, CodelTime(now), PktLen(m), rte_pktmbuf_pkt_len(m) + kSkbTruesizeOverhead};
  flow.Push(e);
  backlogs_[idx] += e.len;
  bytes_ += e.len;
  if (!flow.listed) {
    new_flows_.push_back(idx);
    flow.listed = true;
    counters_.new_flow_count.Add();
    flow.deficit = static_cast<int32_t>(quantum_);
  }
  memory_usage_ += e.mem;
  const bool memory_limited = memory_usage_ > params_.memory_limit;
  ++backlog_;
  if (backlog_ <= params_.limit && !memory_limited) return true;
  const uint64_t dropped = DropFattest();
  if (memory_limited) counters_.drop_overmemory.Add(dropped);
  return true;
}

uint64_t FqCodel::DropFattest() {
  uint32_t maxbacklog = 0, idx = 0;
  for (uint32_t i = 0; i < params_.flows; ++i) {
    if (backlogs_[i] > maxbacklog) {
      maxbacklog = backlogs_[i];
      idx = i;
    }
  }
  // Only requeued frames queued (they count towards the limit, and sit in no bucket): nothing
  // to drop from (the kernel would take the head of an empty bucket).
  if (maxbacklog == 0) return 0;
  // Half the fat flow's bytes, at most drop_batch frames (the first always): the bucket holds
  // all of maxbacklog, so it cannot run dry before len reaches the threshold.
  const uint32_t threshold = maxbacklog >> 1;
  Flow& flow = flows_[idx];
  uint32_t len = 0, i = 0;
  uint64_t wire = 0;
  do {
    const Entry e = flow.Pop();
    len += e.len;
    memory_usage_ -= e.mem;
    bytes_ -= e.len;
    --backlog_;
    wire += WireFrames(e.m);
    Drop(e, counters_.drop_overlimit);
  } while (++i < params_.drop_batch && len < threshold);
  flow.cv.count += i;  // tell CoDel to increase its signal strength too
  backlogs_[idx] -= len;
  return wire;
}

void FqCodel::Drop(const Entry& e, Counter& counter) {
  counter.Add(WireFrames(e.m));
  // kfree_skb: the skb's destructor (tcp_wfree) gives its truesize back to its socket, as it was
  // charged (TsqLedger::Charge: the frame before any GSO cut).
  if (tsq_ != nullptr) tsq_->Uncharge(FlowOf(e.m), e.m);
  rte_pktmbuf_free(e.m);
}

std::optional<FqCodel::Entry> FqCodel::TakeHead(uint32_t idx) {
  Flow& flow = flows_[idx];
  if (flow.n == 0) return std::nullopt;
  const Entry e = flow.Pop();
  backlogs_[idx] -= e.len;
  memory_usage_ -= e.mem;
  --backlog_;
  bytes_ -= e.len;
  return e;
}

bool FqCodel::ShouldDrop(const Entry* e, CodelVars& v, uint32_t now) {
  if (e == nullptr) {
    v.first_above_time = 0;
    return false;
  }
  v.ldelay = now - e->enqueued;
  counters_.maxpacket.Max(e->len);
  if (Before(v.ldelay, target_) || bytes_ <= mtu_) {
    // went below: stay below for at least interval
    v.first_above_time = 0;
    return false;
  }
  if (v.first_above_time == 0) {
    // just went above from below: drop if it stays above for interval
    v.first_above_time = now + interval_;
    return false;
  }
  return After(now, v.first_above_time);
}

std::optional<FqCodel::Entry> FqCodel::CodelDequeue(uint32_t idx, uint32_t now) {
  CodelVars& v = flows_[idx].cv;
  std::optional<Entry> e = TakeHead(idx);
  if (!e) {
    v.dropping = false;
    return e;
  }
  bool drop = ShouldDrop(&*e, v, now);
  if (v.dropping) {
    if (!drop) {
      v.dropping = false;  // sojourn time below target: leave the dropping state
    } else if (AfterEq(now, v.drop_next)) {
      // Time for the next drop; a large backlog may make the one after due at once.
      while (v.dropping && AfterEq(now, v.drop_next)) {
        ++v.count;
        NewtonStep(v.count, v.rec_inv_sqrt);
        if (params_.ecn && MarkCe(e->m)) {
          counters_.ecn_mark.Add();
          v.drop_next = ControlLaw(v.drop_next, interval_, v.rec_inv_sqrt);
          return e;
        }
        Drop(*e, counters_.dropped_codel);
        e = TakeHead(idx);
        if (!ShouldDrop(e ? &*e : nullptr, v, now))
          v.dropping = false;  // leave the dropping state
        else
          v.drop_next = ControlLaw(v.drop_next, interval_, v.rec_inv_sqrt);
      }
    }
  } else if (drop) {
    if (params_.ecn && MarkCe(e->m)) {
      counters_.ecn_mark.Add();
    } else {
      Drop(*e, counters_.dropped_codel);
      e = TakeHead(idx);
      drop = ShouldDrop(e ? &*e : nullptr, v, now);
    }
    v.dropping = true;
    // Back above target soon after it went below: start from the drop rate that controlled
    // the queue last time.
    const uint32_t delta = v.count - v.lastcount;
    if (delta > 1 && Before(now - v.drop_next, 16 * interval_)) {
      v.count = delta;
      NewtonStep(v.count, v.rec_inv_sqrt);
    } else {
      v.count = 1;
      v.rec_inv_sqrt = static_cast<uint16_t>(~0U >> kRecInvSqrtShift);
    }
    v.lastcount = v.count;
    v.drop_next = ControlLaw(now, interval_, v.rec_inv_sqrt);
  }
  return e;
}

rte_mbuf* FqCodel::DequeueOne(uint32_t now) {
  while (true) {
    std::deque<uint32_t>* head = &new_flows_;
    if (head->empty()) {
      head = &old_flows_;
      if (head->empty()) return nullptr;
    }
    const uint32_t idx = head->front();
    Flow& flow = flows_[idx];
    if (flow.deficit <= 0) {
      flow.deficit += static_cast<int32_t>(quantum_);
      head->pop_front();
      old_flows_.push_back(idx);
      continue;
    }
    const std::optional<Entry> e = CodelDequeue(idx, now);
    if (!e) {
      // Force a pass through old_flows to prevent starvation.
      head->pop_front();
      if (head == &new_flows_ && !old_flows_.empty())
        old_flows_.push_back(idx);
      else
        flow.listed = false;
      continue;
    }
    flow.deficit -= static_cast<int32_t>(e->len);
    return e->m;
  }
}

uint16_t FqCodel::DequeueBulk(Batch& batch, const DequeueBudget& budget, Tsc now) {
  BulkLimit limit(budget);
  const uint16_t first = batch.size();
  uint16_t taken = requeue_.TakeInto(batch, limit, 0);
  for (uint16_t i = first; i < first + taken; ++i) bytes_ -= PktLen(batch.frames()[i]);
  backlog_ -= taken;
  const uint32_t t = CodelTime(now);
  while (limit.Allows(taken) && !batch.full()) {
    rte_mbuf* m = DequeueOne(t);
    if (m == nullptr) break;
    limit.Took(m);
    batch.Push(m);
    ++taken;
  }
  return taken;
}

void FqCodel::Requeue(std::span<rte_mbuf* const> frames, bool /*as_list*/) {
  requeue_.PushFront(frames);
  backlog_ += static_cast<unsigned>(frames.size());
  for (rte_mbuf* m : frames) bytes_ += PktLen(m);
}

unsigned FqCodel::Purge() {
  unsigned n = 0;
  Batch batch;
  while (requeue_.size() > 0) {
    batch.Clear();
    BulkLimit limit(DequeueBudget{kMaxBatch});
    const uint16_t k = requeue_.TakeInto(batch, limit, 0);
    rte_pktmbuf_free_bulk(batch.frames().data(), k);
    n += k;
  }
  for (uint32_t i = 0; i < params_.flows; ++i) {
    Flow& f = flows_[i];
    while (f.n > 0) {
      rte_pktmbuf_free(f.Pop().m);
      ++n;
    }
    f.listed = false;
    f.cv = {};
    backlogs_[i] = 0;
  }
  new_flows_.clear();
  old_flows_.clear();
  backlog_ = 0;
  bytes_ = 0;
  memory_usage_ = 0;
  return n;
}

bool FqCodel::MarkCe(rte_mbuf* m) {
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  if (rte_pktmbuf_data_len(m) < sizeof(rte_ether_hdr) + sizeof(rte_ipv4_hdr) ||
      eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4))
    return false;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  // IP_ECN_set_ce: not-ECT is left alone; ECT(0), ECT(1) become CE; CE counts as marked.
  const uint32_t ecn = (ip->type_of_service + 1u) & 3u;
  if ((ecn & 2u) == 0) return ecn == 0;
  ip->type_of_service |= 3;
  ip->hdr_checksum = 0;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  return true;
}

}  // namespace txbatch
