// The tensor-parallel part of the periodic stats line: rank 0's time in collectives over the
// interval's forward steps, nothing on one rank or without steps.
#include "metrics/stats_logger.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(StatsLogger, TpCommTextCoversTheIntervalsSteps) {
  EngineStats before, now;
  before.tensor_parallel_size = now.tensor_parallel_size = 2;
  before.tp_forward_steps = 10;
  before.tp_forward_seconds = 1.0;
  before.tp_comm_seconds = 0.1;
  now.tp_forward_steps = 30;
  now.tp_forward_seconds = 2.0;
  now.tp_comm_seconds = 0.18;
  EXPECT_EQ(TpCommText(now, before), ", TP comm: 4.00 ms/step (8% of forward)");
  EXPECT_EQ(TpCommText(now, now), "");                      // no step in the interval
  EXPECT_EQ(TpCommText(EngineStats(), EngineStats()), "");  // one rank
}

}  // namespace
}  // namespace pagellm
