#include "planner/byte_size.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(ByteSizeTest, Formats) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
  EXPECT_EQ(FormatBytes(int64_t{80} << 30), "80.00 GiB");
  EXPECT_EQ(FormatBytes(int64_t{81050} << 20), "79.15 GiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 40), "3.00 TiB");
  EXPECT_EQ(FormatBytes(-(int64_t{3} << 30)), "-3.00 GiB");
}

}  // namespace
}  // namespace pagellm
