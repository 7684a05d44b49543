// The collectives, point-to-point messages and sub-groups on an in-process group (threads), and
// over MPI when the test binary runs under mpirun (ctest runs it so with the shared-memory and
// with the TCP transport).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "dist/local_communicator.h"
#include "dist/mpi_communicator.h"

namespace pagellm {
namespace {

using std::chrono::milliseconds;

// Rank r's partial: values of very different magnitude so that the summation order shows in
// the bits.
std::vector<float> Partial(int rank, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = (rank % 2 == 0 ? 1e8f : -1e8f) * static_cast<float>(i % 3) + 0.1f * (rank + 1) +
           0.01f * static_cast<float>(i);
  return v;
}

// The rank-order sum written out on its own: ((p0 + p1) + p2) + ...
std::vector<float> RankOrderSum(int size, int64_t n) {
  std::vector<float> sum = Partial(0, n);
  for (int r = 1; r < size; ++r) {
    const std::vector<float> p = Partial(r, n);
    for (int64_t i = 0; i < n; ++i) sum[i] = sum[i] + p[i];
  }
  return sum;
}

// Runs body(comm) on one thread per rank of a local group.
template <typename Body>
void OnLocalGroup(int size, milliseconds timeout, Body body) {
  auto comms = CreateLocalGroup(size, timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { body(*comms[r]); });
  for (std::thread& t : threads) t.join();
}

void CheckCollectives(Communicator& c) {
  const int64_t n = 37;
  std::vector<float> x = Partial(c.rank(), n);
  ASSERT_TRUE(c.AllReduceSum(x.data(), n).ok());
  const std::vector<float> want = RankOrderSum(c.size(), n);
  EXPECT_EQ(0, std::memcmp(x.data(), want.data(), n * sizeof(float))) << "rank " << c.rank();

  std::vector<uint8_t> bytes;
  if (c.rank() == 0) bytes = {1, 2, 3, 250};
  ASSERT_TRUE(c.Broadcast(&bytes, false).ok());
  EXPECT_EQ(bytes, (std::vector<uint8_t>{1, 2, 3, 250}));

  std::vector<uint8_t> mine(c.rank() + 1, static_cast<uint8_t>(10 + c.rank()));
  std::vector<std::vector<uint8_t>> all;
  ASSERT_TRUE(c.GatherToRoot(mine, &all).ok());
  if (c.rank() == 0) {
    ASSERT_EQ(static_cast<int>(all.size()), c.size());
    for (int r = 0; r < c.size(); ++r)
      EXPECT_EQ(all[r], std::vector<uint8_t>(r + 1, static_cast<uint8_t>(10 + r)));
  } else {
    EXPECT_TRUE(all.empty());
  }
  EXPECT_TRUE(c.Barrier().ok());
}

TEST(LocalCommunicator, CollectivesSumInRankOrder) {
  for (int size : {1, 2, 3, 4}) OnLocalGroup(size, milliseconds(10000), CheckCollectives);
}

TEST(LocalCommunicator, EmptyBroadcastAndRepeatedRounds) {
  OnLocalGroup(3, milliseconds(10000), [](Communicator& c) {
    for (int round = 0; round < 50; ++round) {
      std::vector<uint8_t> bytes;
      if (c.rank() == 0 && round % 2 == 1) bytes.assign(round, static_cast<uint8_t>(round));
      ASSERT_TRUE(c.Broadcast(&bytes, false).ok());
      EXPECT_EQ(bytes.size(), round % 2 == 1 ? static_cast<size_t>(round) : 0u);
      float v = static_cast<float>(c.rank() + round);
      ASSERT_TRUE(c.AllReduceSum(&v, 1).ok());
      EXPECT_EQ(v, static_cast<float>(3 * round + 3));
    }
  });
}

TEST(LocalCommunicator, MissingRankTimesOut) {
  auto comms = CreateLocalGroup(2, milliseconds(200));
  float v = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  Status s = comms[0]->AllReduceSum(&v, 1);  // rank 1 never joins
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("did not arrive"), std::string::npos) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Messages go around the ring in order (two per pair, of different sizes, an empty one
// included); then the ranks split by parity and each sub-group runs the collectives.
void CheckSendRecvAndSplit(Communicator& c) {
  const int next = (c.rank() + 1) % c.size(), prev = (c.rank() + c.size() - 1) % c.size();
  if (c.size() > 1) {
    const std::vector<uint8_t> first(c.rank() + 3, static_cast<uint8_t>(c.rank()));
    ASSERT_TRUE(c.Send(next, first, 1).ok());
    ASSERT_TRUE(c.Send(next, {}, 1).ok());
    std::vector<uint8_t> got;
    ASSERT_TRUE(c.Recv(prev, &got, 1).ok());
    EXPECT_EQ(got, std::vector<uint8_t>(prev + 3, static_cast<uint8_t>(prev)));
    ASSERT_TRUE(c.Recv(prev, &got, 1).ok());
    EXPECT_TRUE(got.empty());
  }
  // Odd ranks ranked in reverse (key = -rank): a sub-group's rank 0 is its highest world rank.
  const int color = c.rank() % 2;
  auto sub = c.Split(color, color == 0 ? c.rank() : -c.rank());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  const int members = (c.size() + (color == 0 ? 1 : 0)) / 2;
  EXPECT_EQ((*sub)->size(), members);
  EXPECT_EQ((*sub)->rank(), color == 0 ? c.rank() / 2 : members - 1 - c.rank() / 2);
  CheckCollectives(**sub);
  // The parent still works after (and between) its sub-groups' collectives.
  EXPECT_TRUE(c.Barrier().ok());
}

TEST(LocalCommunicator, SendRecvAndSplit) {
  for (int size : {1, 2, 3, 4}) OnLocalGroup(size, milliseconds(10000), CheckSendRecvAndSplit);
}

TEST(LocalCommunicator, RecvWithoutASenderTimesOut) {
  auto comms = CreateLocalGroup(2, milliseconds(100));
  std::vector<uint8_t> got;
  const auto start = std::chrono::steady_clock::now();
  Status s = comms[1]->Recv(0, &got, 2);  // two timeouts
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(190));
  EXPECT_EQ(comms[0]->Send(0, got, 1).code(), StatusCode::kInvalidArgument);  // to itself
}

// A failed rank ends the group: a collective already waiting (even without a bound) and every
// later one return its reason at once, on every rank.
TEST(LocalCommunicator, AbortReleasesWaitingAndLaterCollectives) {
  auto comms = CreateLocalGroup(3, milliseconds(60000));
  Status waiting[2];
  std::thread t1([&] {
    std::vector<uint8_t> bytes;
    waiting[0] = comms[1]->Broadcast(&bytes, /*wait_forever=*/true);
  });
  std::thread t2([&] {
    float v = 1.0f;
    waiting[1] = comms[2]->AllReduceSum(&v, 1);
  });
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = std::chrono::steady_clock::now();
  AbortLocalGroup(*comms[0], InternalError("rank 0 gave up"));
  t1.join();
  t2.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (const Status& s : waiting) {
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(s.message(), "rank 0 gave up");
  }
  EXPECT_EQ(comms[0]->Barrier().message(), "rank 0 gave up");
  std::vector<std::vector<uint8_t>> all;
  EXPECT_EQ(comms[1]->GatherToRoot({}, &all).code(), StatusCode::kInternal);
  // The first reason stays.
  AbortLocalGroup(*comms[2], UnavailableError("later"));
  EXPECT_EQ(comms[2]->Barrier().message(), "rank 0 gave up");
}

// Under mpirun (ctest: dist_mpi_shm, dist_mpi_tcp) the same checks run across processes.
TEST(MpiCommunicator, CollectivesSumInRankOrder) {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) GTEST_SKIP() << "not started by mpirun";
  auto comm = MpiCommunicator::Create(milliseconds(30000));
  ASSERT_TRUE(comm.ok()) << comm.status().message();
  CheckCollectives(**comm);
  // Large rows (a prefill chunk's hidden states) go through the same path.
  const int64_t n = 1 << 20;
  std::vector<float> x = Partial((*comm)->rank(), n);
  ASSERT_TRUE((*comm)->AllReduceSum(x.data(), n).ok());
  const std::vector<float> want = RankOrderSum((*comm)->size(), n);
  EXPECT_EQ(0, std::memcmp(x.data(), want.data(), n * sizeof(float)));
  CheckSendRecvAndSplit(**comm);
  // A large message (a prefill micro-batch's hidden states) between two ranks.
  if ((*comm)->size() > 1 && (*comm)->rank() < 2) {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(want.data()),
                                         want.size() * sizeof(float));
    if ((*comm)->rank() == 0) {
      ASSERT_TRUE((*comm)->Send(1, bytes, 1).ok());
    } else {
      std::vector<uint8_t> got;
      ASSERT_TRUE((*comm)->Recv(0, &got, 1).ok());
      EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes.begin(), bytes.end()));
    }
  }
}

}  // namespace
}  // namespace pagellm
