#include "dataplane/tx_meta.h"

#include <cstring>

namespace txbatch {

int TxMetaOffset() {
  static const int offset = [] {
    rte_mbuf_dynfield desc{};
    std::strncpy(desc.name, "txbatch_tx_meta", sizeof(desc.name) - 1);
    desc.size = sizeof(TxMeta);
    desc.align = alignof(TxMeta);
    return rte_mbuf_dynfield_register(&desc);
  }();
  return offset;
}

}  // namespace txbatch
