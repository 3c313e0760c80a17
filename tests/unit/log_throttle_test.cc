// LogThrottle: a burst per window is logged, the rest counted and reported
// with the next message that is.
#include "galley/logging/log_throttle.h"

#include <gtest/gtest.h>

namespace galley {
namespace {

using namespace std::chrono_literals;

TEST(LogThrottleTest, ABurstPerWindowThenACountOfTheDropped) {
  LogThrottle throttle(3, 10s);
  const auto t0 = LogThrottle::Clock::time_point{} + 100s;
  uint64_t dropped = 99;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(throttle.Allow(t0 + std::chrono::seconds(i), &dropped));
    EXPECT_EQ(dropped, 0u);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(throttle.Allow(t0 + 5s, &dropped));
  // A new window: logged again, with the count of what was not.
  ASSERT_TRUE(throttle.Allow(t0 + 11s, &dropped));
  EXPECT_EQ(dropped, 1000u);
  ASSERT_TRUE(throttle.Allow(t0 + 12s, &dropped));
  EXPECT_EQ(dropped, 0u);
}

TEST(LogThrottleTest, AQuietSourceIsNeverThrottled) {
  LogThrottle throttle(2, 1s);
  uint64_t dropped = 0;
  const auto t0 = LogThrottle::Clock::time_point{} + 100s;
  for (int i = 0; i < 50; ++i) {
    EXPECT_TRUE(throttle.Allow(t0 + std::chrono::seconds(i), &dropped));
    EXPECT_EQ(dropped, 0u);
  }
}

}  // namespace
}  // namespace galley
