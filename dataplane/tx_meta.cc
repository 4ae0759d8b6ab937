#include "dataplane/tx_meta.h"

#include <cstring>

namespace txbatch {

int RegisterDynfield(const char* name, size_t size, size_t align) {
  rte_mbuf_dynfield desc{};
  std::strncpy(desc.name, name, sizeof(desc.name) - 1);
  desc.size = size;
  desc.align = align;
  return rte_mbuf_dynfield_register(&desc);
}

int TxMetaOffset() {
  static const int offset = RegisterDynfield("txbatch_tx_meta", sizeof(TxMeta), alignof(TxMeta));
  return offset;
}

}  // namespace txbatch
