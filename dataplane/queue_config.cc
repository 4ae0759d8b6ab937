#include "dataplane/queue_config.h"

namespace txbatch {

std::unique_ptr<Qdisc> MakeQdisc(const TxQueueConfig& config, QdiscCounters& counters,
                                 QdiscLimit bound) {
  if (config.shape.fq_codel)
    return std::make_unique<FqCodel>(*config.shape.fq_codel, config.psched_mtu, config.tsc_hz,
                                     counters);
  return std::make_unique<PfifoFast>(config.txqueuelen, config.shape.pfifo ? 1 : kPfifoBands,
                                     bound);
}

}  // namespace txbatch
