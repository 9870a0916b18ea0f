// Names for gnio's own threads, so that `top -H`, `ps -L`, gdb and perf tell them apart from the
// application's (NCCL names its threads the same way).
#pragma once

#include <pthread.h>

namespace gnio {

/// Names the calling thread (Linux keeps the first 15 characters). Best effort: a failure leaves
/// the inherited name.
inline void name_this_thread(const char* name) {
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace gnio
