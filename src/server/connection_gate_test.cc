#include "server/connection_gate.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(ScanRequestHeadTest, IncompleteUntilTheBlankLine) {
  EXPECT_EQ(ScanRequestHead("GET / HTTP/1.1\r\nHost: x\r\n", 16384).state,
            HeadScan::State::kIncomplete);
  const HeadScan scan = ScanRequestHead("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 16384);
  EXPECT_EQ(scan.state, HeadScan::State::kComplete);
  EXPECT_EQ(scan.head_bytes, 27u);
  EXPECT_EQ(scan.content_length, 0);
}

TEST(ScanRequestHeadTest, ReadsContentLengthCaseInsensitively) {
  const HeadScan scan = ScanRequestHead(
      "POST /v1/completions HTTP/1.1\r\ncontent-LENGTH:  42 \r\nHost: x\r\n\r\n{\"a\"", 16384);
  EXPECT_EQ(scan.state, HeadScan::State::kComplete);
  EXPECT_EQ(scan.content_length, 42);
}

TEST(ScanRequestHeadTest, ChunkedOrMalformedLengthIsUnknown) {
  EXPECT_EQ(ScanRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: "
                            "5\r\n\r\n",
                            16384)
                .content_length,
            -1);
  EXPECT_EQ(ScanRequestHead("POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 16384).content_length,
            -1);
  EXPECT_EQ(
      ScanRequestHead("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 16384)
          .content_length,
      -1);
}

TEST(ScanRequestHeadTest, TooLargeHeads) {
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a');
  EXPECT_EQ(ScanRequestHead(big, 64).state, HeadScan::State::kTooLarge);
  EXPECT_EQ(ScanRequestHead(big + "\r\n\r\n", 64).state, HeadScan::State::kTooLarge);
  EXPECT_EQ(ScanRequestHead(big + "\r\n\r\n", 1024).state, HeadScan::State::kComplete);
}

}  // namespace
}  // namespace pagellm
