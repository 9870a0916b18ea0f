// Everything kernels use: DeviceComm and its operations, cooperation groups, teams, symmetric
// pointers, thread indexing and the launch helper's device side.
#pragma once

#include "gnio/device/atomic.hpp"
#include "gnio/device/coop.hpp"
#include "gnio/device/device_comm.hpp"
#include "gnio/device/macros.hpp"
#include "gnio/device/status.hpp"
#include "gnio/device/sym_ptr.hpp"
#include "gnio/device/team.hpp"
#include "gnio/device/thread.hpp"
