#pragma once
// One EAL per unit-test binary (EAL cannot restart in a process), without hugepages, and a
// packet pool the tests share. Tests check the pool is full again when they finish.

#include <rte_mempool.h>

namespace txbatch::test {

// The shared pool (2047 mbufs, MTU 1500, txbatch's spread layout).
rte_mempool* Pool();
// TSC frequency as EAL measured it.
double TscHz();

}  // namespace txbatch::test
