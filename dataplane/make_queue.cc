#include "dataplane/make_queue.h"

#include "dataplane/nolock_queue.h"
#include "dataplane/rootlock_queue.h"

namespace txbatch {

std::unique_ptr<TxQueue> MakeTxQueue(TxDriver& driver, const FlushPolicy& policy,
                                     const TxQueueConfig& config, const RunWindow& window) {
  if (config.shape.nolock && !config.shape.noqueue && !config.shape.pfifo &&
      !config.shape.fq_codel)
    return std::make_unique<NolockTxQueue>(driver, policy, config, window);
  return std::make_unique<RootlockTxQueue>(driver, policy, config, window);
}

}  // namespace txbatch
