#pragma once
// Where a frame's latency goes: a few stage timestamps carried in an mbuf dynamic field from the
// producer through the queue and the driver to the sink, which splits the latency into stages
// (qdisc wait or batch fill, driver and ring, wire) and by position in the batch. Only offsets
// from the frame's TX stamp are stored, so the field stays small (the mbuf has 36 bytes for all
// dynamic fields). A frame that crossed a copying path (memif) arrives in a different mbuf:
// `stamp` then does not match the frame's own TX stamp and the sink ignores the field.

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

#include <algorithm>
#include <cstdint>
#include <span>

#include "base/tsc.h"

namespace txbatch {

struct TxMeta {
  uint64_t stamp;        // the frame's TX stamp (also the check that the field is this frame's)
  uint32_t to_handover;  // TSC from the stamp to the driver call that took it (last one)
  uint32_t to_wire;      // TSC from that call to its first bit on the wire (kMetaWireKnown)
  uint16_t position;     // its index in the batch of that driver call
  uint16_t flags;
};
inline constexpr uint16_t kMetaWireKnown = 1;  // the driver models a wire and set to_wire

// Registers (or finds, registered before) the mbuf dynamic field `name` of `size` bytes aligned
// to `align`; its offset, or -1 when the mbuf has no room left (rte_errno says why).
[[nodiscard]] int RegisterDynfield(const char* name, size_t size, size_t align);

// The dynamic field's offset, registered on first use (after EAL is up); -1 when the mbuf has
// no room left, and then no stage is recorded.
int TxMetaOffset();

inline TxMeta* MetaOf(rte_mbuf* m, int offset) { return RTE_MBUF_DYNFIELD(m, offset, TxMeta*); }

// TSC differences kept in 32 bits: 1.6 s at 2.6 GHz; longer waits saturate.
inline uint32_t Saturate32(Tsc d) { return static_cast<uint32_t>(std::min<Tsc>(d, UINT32_MAX)); }

// Records in each frame's TxMeta that it was handed to the driver at `now`, and at which position
// of the batch.
inline void MarkHandover(std::span<rte_mbuf* const> frames, Tsc now, int offset) {
  for (size_t i = 0; i < frames.size(); ++i) {
    TxMeta* t = MetaOf(frames[i], offset);
    t->to_handover = now > t->stamp ? Saturate32(now - t->stamp) : 0;
    t->position = static_cast<uint16_t>(i);
  }
}

}  // namespace txbatch
