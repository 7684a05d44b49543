// AsyncEngine under concurrent clients (the engine's stress suite, also run under
// ThreadSanitizer by scripts/tsan.sh): several threads submit, stream, abort, read stats and
// reset the prefix cache while the loop thread steps a scripted engine (no model file), and
// every request's output must still equal the script's greedy continuation.
#include "engine/async_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine_test_fixtures.h"

namespace pagellm {
namespace {

using namespace engine_testing;  // NOLINT: the fixtures are this test's vocabulary

// What one request received through its callback (written on the loop thread, read by the
// client after the final output, ordered by the stream's mutex).
struct Received {
  std::vector<int32_t> tokens;
  int num_final = 0;
  FinishReason finish_reason = FinishReason::kStop;
};

// Waits until the loop thread's published stats show no request and every block free.
void ExpectDrained(const AsyncEngine& engine) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  EngineStats s = engine.stats();
  while (std::chrono::steady_clock::now() < deadline &&
         (s.num_running + s.num_waiting + s.num_swapped != 0 ||
          s.num_free_blocks != s.num_usable_blocks)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = engine.stats();
  }
  EXPECT_EQ(s.num_running + s.num_waiting + s.num_swapped, 0);
  EXPECT_EQ(s.num_free_blocks, s.num_usable_blocks);
}

TEST(AsyncEngineStressTest, ConcurrentClientsGetTheScriptedOutputs) {
  ScriptedBackend::Log log;
  AsyncEngine engine(MakeEngine(CountUp, &log));
  constexpr int kClients = 6;
  constexpr int kRequestsPerClient = 40;
  std::atomic<bool> clients_done{false};

  // A monitor that reads stats and asks for prefix-cache resets while requests run (a reset is
  // refused while blocks are in use; either answer is fine, what matters is no race).
  std::thread monitor([&] {
    int64_t seen = 0;
    while (!clients_done.load()) {
      seen += engine.stats().num_running;
      if (seen % 7 == 0) engine.ResetPrefixCache();
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(1234 + c);
      for (int i = 0; i < kRequestsPerClient; ++i) {
        const std::string id = "c" + std::to_string(c) + "-" + std::to_string(i);
        std::vector<int32_t> prompt = {kBos};
        const int prompt_len = 1 + static_cast<int>(rng() % 20);
        // Shared first tokens across clients, so prefix-cache hits happen.
        for (int t = 0; t < prompt_len; ++t)
          prompt.push_back(2 + static_cast<int32_t>((t < 8 ? t : rng()) % (kVocab - 2)));
        const int max_tokens = 1 + static_cast<int>(rng() % 20);
        const bool abort_early = i % 5 == 3;

        OutputStream stream;
        if (!engine.Submit(Greedy(id, prompt, max_tokens), stream.Callback()).ok()) {
          ++failures;
          return;
        }
        Received got;
        bool aborted = false;
        while (std::optional<EngineOutput> o = stream.Next()) {
          got.tokens.insert(got.tokens.end(), o->new_token_ids.begin(), o->new_token_ids.end());
          if (abort_early && !aborted) {
            engine.Abort(id);
            aborted = true;
          }
          if (o->finished) {
            ++got.num_final;
            got.finish_reason = o->finish_reason;
          }
        }
        const std::vector<int32_t> want = Expected(CountUp, prompt, max_tokens);
        bool ok = got.num_final == 1;
        if (abort_early) {
          // Aborted after its first output: a prefix of the scripted continuation (all of it
          // when the request finished before the abort arrived).
          ok = ok && got.tokens.size() <= want.size() &&
               std::equal(got.tokens.begin(), got.tokens.end(), want.begin()) &&
               (got.finish_reason == FinishReason::kAbort || got.tokens == want);
        } else {
          ok = ok && got.tokens == want && got.finish_reason == FinishReason::kLength;
        }
        if (!ok) {
          ++failures;
          ADD_FAILURE() << id << ": " << got.tokens.size() << " tokens, want " << want.size();
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  clients_done = true;
  monitor.join();
  EXPECT_EQ(failures.load(), 0);
  ExpectDrained(engine);
  engine.Shutdown();
  EXPECT_GT(log.num_forwards, 0);
  EXPECT_GT(log.max_seqs, 1);  // requests really shared steps
}

TEST(AsyncEngineStressTest, ShutdownFinishesEveryRequestInFlightOnce) {
  ScriptedBackend::Log log;
  AsyncEngine engine(MakeEngine(CountUp, &log));
  constexpr int kClients = 3;
  constexpr int kRequestsPerClient = 12;
  std::mutex mu;
  std::map<std::string, Received> received;
  std::atomic<int> submitted{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kRequestsPerClient; ++i) {
        const std::string id = "s" + std::to_string(c) + "-" + std::to_string(i);
        Status st = engine.Submit(Greedy(id, {kBos, 5, 6, 7}, 40), [&, id](EngineOutput&& o) {
          std::lock_guard<std::mutex> lock(mu);
          Received& r = received[id];
          r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
          if (o.finished) ++r.num_final;
        });
        // Submissions racing the shutdown are either queued (and finished by it) or refused.
        if (st.ok()) {
          ++submitted;
        } else {
          EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
        }
      }
    });
  }
  while (submitted.load() < kClients * 2) std::this_thread::yield();
  std::thread stopper([&] { engine.Shutdown(); });
  for (std::thread& t : clients) t.join();
  stopper.join();
  engine.Shutdown();  // idempotent
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(static_cast<int>(received.size()), submitted.load());
  for (const auto& [id, r] : received) EXPECT_EQ(r.num_final, 1) << id;
  EXPECT_FALSE(engine.Submit(Greedy("late", {kBos, 2}, 1), [](EngineOutput&&) {}).ok());
}

}  // namespace
}  // namespace pagellm
