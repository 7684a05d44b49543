#include "kv/free_block_queue.h"

#include <gtest/gtest.h>

#include <vector>

namespace pagellm {
namespace {

using Ids = std::vector<int32_t>;

TEST(FreeBlockQueueTest, StartsWithAllIdsInOrder) {
  FreeBlockQueue q(5);
  EXPECT_EQ(q.size(), 5);
  EXPECT_EQ(q.ToVector(), (Ids{0, 1, 2, 3, 4}));
  EXPECT_EQ(q.Front(), 0);
  FreeBlockQueue empty(0);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.ToVector(), Ids{});
}

TEST(FreeBlockQueueTest, PopRemoveAppendKeepLruOrder) {
  FreeBlockQueue q(6);
  EXPECT_EQ(q.PopFront(), 0);
  EXPECT_EQ(q.PopFrontN(2), (Ids{1, 2}));
  EXPECT_EQ(q.ToVector(), (Ids{3, 4, 5}));
  q.Remove(4);  // middle
  EXPECT_FALSE(q.Contains(4));
  EXPECT_EQ(q.ToVector(), (Ids{3, 5}));
  q.Remove(5);  // back
  q.Remove(3);  // front, leaving the queue empty
  EXPECT_TRUE(q.empty());
  q.Append(2);
  q.AppendN(Ids{0, 4});
  q.Append(1);
  EXPECT_EQ(q.ToVector(), (Ids{2, 0, 4, 1}));
  EXPECT_EQ(q.size(), 4);
  EXPECT_TRUE(q.Contains(0));
  EXPECT_FALSE(q.Contains(3));
  EXPECT_EQ(q.PopFrontN(4), (Ids{2, 0, 4, 1}));
  EXPECT_EQ(q.PopFrontN(0), Ids{});
}

TEST(FreeBlockQueueDeathTest, MisuseAborts) {
  FreeBlockQueue q(3);
  EXPECT_DEATH(q.Append(1), "already in the free queue");
  q.Remove(1);
  EXPECT_DEATH(q.Remove(1), "not in the free queue");
  EXPECT_DEATH(q.Contains(3), "outside");
  EXPECT_DEATH(q.PopFrontN(3), "popping 3 of 2");
}

}  // namespace
}  // namespace pagellm
