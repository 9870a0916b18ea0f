// The whole public host API of gnio (the device API is gnio/device.hpp, included here too).
#pragma once

#include "gnio/bootstrap.hpp"
#include "gnio/comm.hpp"
#include "gnio/config.hpp"
#include "gnio/device.hpp"
#include "gnio/error.hpp"
#include "gnio/launch.hpp"
#include "gnio/log.hpp"
#include "gnio/rank_ranges.hpp"
#include "gnio/stream.hpp"
#include "gnio/version.hpp"
