// Corrupt-file suite for the GGUF and safetensors readers: valid files from the test writers,
// then truncated, patched and hostile variants. Every case must fail with a Status naming the
// file and the key or tensor, never crash or allocate absurd amounts.
#include <gtest/gtest.h>

#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "model/gguf_file.h"
#include "model/safetensors_file.h"
#include "model/test_file_writers.h"

namespace pagellm {
namespace {

using testing::ByteWriter;
using testing::GgufBuilder;
using testing::SafetensorsBuilder;
using testing::TinyModelSpec;

constexpr const char* kGguf = "tiny.gguf";
constexpr const char* kSt = "tiny.safetensors";

// Exact-size copy so AddressSanitizer builds catch any read past the end.
std::vector<uint8_t> Bytes(const std::string& s, size_t n = std::string::npos) {
  n = std::min(n, s.size());
  return std::vector<uint8_t>(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n));
}

StatusOr<std::unique_ptr<GgufFile>> ParseGguf(const std::vector<uint8_t>& b) {
  return GgufFile::Parse(b.data(), b.size(), kGguf);
}
StatusOr<std::unique_ptr<SafetensorsFile>> ParseSt(const std::vector<uint8_t>& b) {
  return SafetensorsFile::Parse(b.data(), b.size(), kSt);
}

template <typename T>
void ExpectError(const StatusOr<T>& r, StatusCode code, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  for (const char* p : parts) {
    EXPECT_NE(r.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << r.status().message();
  }
}

void PatchU64(std::string* s, size_t at, uint64_t v) {
  std::memcpy(&(*s)[at], &v, 8);
}

// A small GGUF with one key of each common kind and two tensors.
GgufBuilder SmallGguf() {
  GgufBuilder b;
  b.AddString("general.architecture", "llama");
  b.AddU32("llama.block_count", 5);
  b.AddF32("llama.rope.freq_base", 10000.0f);
  b.AddBool("general.flag", true);
  b.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  b.AddF32Array("tokenizer.ggml.scores", {0.0f, -1.0f, -2.0f});
  b.AddTensor("a.weight", {32, 3}, testing::kGgmlF32);
  b.AddTensor("b.weight", {64, 2}, testing::kGgmlQ8_0);
  return b;
}

TEST(GgufFile, ParsesValidFile) {
  const auto bytes = Bytes(SmallGguf().Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& g = **r;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.name(), kGguf);
  EXPECT_EQ(g.keys().size(), 6u);
  EXPECT_EQ(*g.GetString("general.architecture"), "llama");
  EXPECT_EQ(*g.GetInt("llama.block_count"), 5);
  EXPECT_DOUBLE_EQ(*g.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_DOUBLE_EQ(*g.GetFloat("llama.block_count"), 5.0);
  EXPECT_TRUE(*g.GetBool("general.flag"));
  auto tokens = g.GetArray("tokenizer.ggml.tokens", GgufType::kString);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ((*tokens)->strings.size(), 3u);
  EXPECT_EQ((*tokens)->strings[1], "<s>");
  auto scores = g.GetArray("tokenizer.ggml.scores", GgufType::kFloat32);
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ((*scores)->floats[2], -2.0f);

  ASSERT_EQ(g.tensors().size(), 2u);
  const TensorView* a = g.FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 32}));  // outer-first
  EXPECT_EQ(a->nbytes, 3u * 32 * 4);
  EXPECT_EQ((a->data - bytes.data()) % 32, 0);
  const TensorView* b = g.FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kQ8_0);
  EXPECT_EQ(b->nbytes, 2u * 2 * 34);
  EXPECT_EQ(g.FindTensor("missing"), nullptr);
  EXPECT_EQ(g.Find("missing"), nullptr);
}

TEST(GgufFile, TypedGettersNameTheKey) {
  const auto bytes = Bytes(SmallGguf().Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok());
  const GgufFile& g = **r;
  ExpectError(g.GetString("nope"), StatusCode::kNotFound, {kGguf, "'nope'"});
  ExpectError(g.GetInt("general.architecture"), StatusCode::kInvalidArgument,
              {kGguf, "'general.architecture'"});
  ExpectError(g.GetString("llama.block_count"), StatusCode::kInvalidArgument,
              {"'llama.block_count'"});
  ExpectError(g.GetBool("llama.block_count"), StatusCode::kInvalidArgument, {"block_count"});
  ExpectError(g.GetFloat("tokenizer.ggml.tokens"), StatusCode::kInvalidArgument, {"tokens"});
  ExpectError(g.GetArray("tokenizer.ggml.tokens", GgufType::kInt32), StatusCode::kInvalidArgument,
              {"tokenizer.ggml.tokens", "array of string"});
  ExpectError(g.GetArray("llama.block_count", GgufType::kInt32), StatusCode::kInvalidArgument,
              {"block_count"});
}

TEST(GgufFile, AllScalarTypes) {
  GgufBuilder b;
  b.AddRaw("u8", 0, std::string("\xff", 1));
  b.AddRaw("i8", 1, std::string("\xff", 1));
  b.AddRaw("u16", 2, std::string("\xff\xff", 2));
  b.AddRaw("i16", 3, std::string("\xfe\xff", 2));
  b.AddRaw("u64big", 10, std::string(8, '\xff'));
  b.AddRaw("i64", 11, ByteWriter().Put<int64_t>(-7).bytes());
  b.AddRaw("f64", 12, ByteWriter().Put<double>(2.5).bytes());
  b.AddRaw("u8arr", 9,
           ByteWriter().Put<uint32_t>(0).Put<uint64_t>(2).Put<uint8_t>(3).Put<uint8_t>(4).bytes());
  const auto bytes = Bytes(b.Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const GgufFile& g = **r;
  EXPECT_EQ(*g.GetInt("u8"), 255);
  EXPECT_EQ(*g.GetInt("i8"), -1);
  EXPECT_EQ(*g.GetInt("u16"), 65535);
  EXPECT_EQ(*g.GetInt("i16"), -2);
  EXPECT_EQ(*g.GetInt("i64"), -7);
  EXPECT_DOUBLE_EQ(*g.GetFloat("f64"), 2.5);
  ExpectError(g.GetInt("u64big"), StatusCode::kOutOfRange, {kGguf, "u64big"});
  auto arr = g.GetArray("u8arr", GgufType::kUint8);
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ((*arr)->ints, (std::vector<int64_t>{3, 4}));
}

TEST(GgufFile, Version2Accepted) {
  GgufBuilder b = SmallGguf();
  b.version = 2;
  const auto bytes = Bytes(b.Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->version(), 2u);
}

TEST(GgufFile, Version1AndUnknownVersionsRejected) {
  GgufBuilder b = SmallGguf();
  b.version = 1;
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kUnimplemented, {kGguf, "version 1"});
  b.version = 4;
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "version 4"});
  b.version = 0;
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "version"});
}

TEST(GgufFile, BadMagic) {
  std::string s = SmallGguf().Build();
  s[0] = 'X';
  ExpectError(ParseGguf(Bytes(s)), StatusCode::kDataLoss, {kGguf, "magic"});
  ExpectError(ParseGguf(Bytes("")), StatusCode::kDataLoss, {kGguf, "magic"});
}

TEST(GgufFile, EveryPrefixOfSmallFileFails) {
  const std::string s = SmallGguf().Build();
  for (size_t n = 0; n < s.size(); ++n) {
    const auto bytes = Bytes(s, n);
    auto r = ParseGguf(bytes);
    ASSERT_FALSE(r.ok()) << "prefix " << n << " of " << s.size() << " parsed";
    ASSERT_NE(r.status().message().find(kGguf), std::string::npos) << r.status().message();
  }
  EXPECT_TRUE(ParseGguf(Bytes(s)).ok());
}

TEST(GgufFile, EveryPrefixOfTinyModelFails) {
  TinyModelSpec spec;
  spec.layers = 1;
  const std::string s = testing::TinyGguf(spec).Build();
  for (size_t n = 0; n < s.size(); n += (n < 4096 ? 1 : 97)) {
    const auto bytes = Bytes(s, n);
    auto r = ParseGguf(bytes);
    ASSERT_FALSE(r.ok()) << "prefix " << n << " of " << s.size() << " parsed";
    ASSERT_NE(r.status().message().find(kGguf), std::string::npos) << r.status().message();
  }
}

TEST(GgufFile, TruncatedTensorDataNamesTensorAndSize) {
  const std::string s = SmallGguf().Build();
  ExpectError(ParseGguf(Bytes(s, s.size() - 1)), StatusCode::kDataLoss,
              {kGguf, "tensor 'b.weight'", "beyond end of file", "size "});
}

TEST(GgufFile, HugeCountsDoNotAllocate) {
  const std::string base = SmallGguf().Build();
  std::string s = base;
  PatchU64(&s, 16, uint64_t{1} << 60);  // kv_count
  ExpectError(ParseGguf(Bytes(s)), StatusCode::kDataLoss, {kGguf, "metadata count"});
  s = base;
  PatchU64(&s, 8, uint64_t{1} << 60);  // tensor_count
  ExpectError(ParseGguf(Bytes(s)), StatusCode::kDataLoss, {kGguf, "tensor count"});
  s = base;
  PatchU64(&s, 24, uint64_t{1} << 62);  // length of the first key
  ExpectError(ParseGguf(Bytes(s)), StatusCode::kDataLoss, {kGguf, "key #0 length"});
  s = base;
  PatchU64(&s, 24, ~uint64_t{0});
  ExpectError(ParseGguf(Bytes(s)), StatusCode::kDataLoss, {kGguf, "length"});
}

TEST(GgufFile, HugeStringValueAndArrayCount) {
  GgufBuilder b;
  b.AddRaw("general.name", testing::kGgufString,
           ByteWriter().Put<uint64_t>(uint64_t{1} << 61).bytes());
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "'general.name'"});

  GgufBuilder a;
  a.AddRaw(
      "tokenizer.ggml.tokens", testing::kGgufArray,
      ByteWriter().Put<uint32_t>(testing::kGgufString).Put<uint64_t>(uint64_t{1} << 60).bytes());
  ExpectError(ParseGguf(Bytes(a.Build())), StatusCode::kDataLoss,
              {kGguf, "'tokenizer.ggml.tokens'", "array"});

  GgufBuilder c;  // count fits only if elements were 0 bytes
  c.AddRaw("x", testing::kGgufArray,
           ByteWriter().Put<uint32_t>(testing::kGgufU64).Put<uint64_t>(5).Put<uint64_t>(1).bytes());
  ExpectError(ParseGguf(Bytes(c.Build())), StatusCode::kDataLoss, {kGguf, "'x'"});
}

TEST(GgufFile, BadValueTypes) {
  GgufBuilder b;
  b.AddRaw("weird", 13, "abcd");
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "'weird'", "type 13"});
  GgufBuilder n;
  n.AddRaw("nested", testing::kGgufArray,
           ByteWriter()
               .Put<uint32_t>(testing::kGgufArray)
               .Put<uint64_t>(1)
               .Put<uint32_t>(0)
               .Put<uint64_t>(0)
               .bytes());
  ExpectError(ParseGguf(Bytes(n.Build())), StatusCode::kDataLoss, {kGguf, "'nested'", "nested"});
  GgufBuilder e;
  e.AddRaw("elem", testing::kGgufArray, ByteWriter().Put<uint32_t>(99).Put<uint64_t>(0).bytes());
  ExpectError(ParseGguf(Bytes(e.Build())), StatusCode::kDataLoss, {kGguf, "'elem'"});
}

TEST(GgufFile, DuplicateKeysAndTensors) {
  GgufBuilder b;
  b.AddU32("k", 1);
  b.AddU32("k", 2);
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "duplicate", "'k'"});
  GgufBuilder t;
  t.AddTensor("w", {32}, testing::kGgmlF32);
  t.AddTensor("w", {32}, testing::kGgmlF32);
  ExpectError(ParseGguf(Bytes(t.Build())), StatusCode::kDataLoss, {kGguf, "duplicate", "'w'"});
}

TEST(GgufFile, BadDimensions) {
  GgufBuilder b;
  b.AddTensor("nine", {1, 1, 1, 1, 1, 1, 1, 1, 1}, testing::kGgmlF32, std::string(4, '\0'));
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kDataLoss, {kGguf, "'nine'", "n_dims 9"});
  GgufBuilder z;
  z.AddTensor("zero_dims", {}, testing::kGgmlF32, std::string(4, '\0'));
  ExpectError(ParseGguf(Bytes(z.Build())), StatusCode::kDataLoss, {kGguf, "'zero_dims'"});
  GgufBuilder e;
  e.AddTensor("empty", {32, 0}, testing::kGgmlF32, std::string(4, '\0'));
  ExpectError(ParseGguf(Bytes(e.Build())), StatusCode::kDataLoss, {kGguf, "'empty'", "ne[1]"});
  GgufBuilder o;
  o.AddTensor("overflow", {uint64_t{1} << 32, uint64_t{1} << 32, 4}, testing::kGgmlF32, "x");
  ExpectError(ParseGguf(Bytes(o.Build())), StatusCode::kDataLoss,
              {kGguf, "'overflow'", "overflow"});
  GgufBuilder big;  // element count fits in int64 but the byte size does not
  big.AddTensor("bytes", {uint64_t{1} << 31, uint64_t{1} << 31}, testing::kGgmlF32, "x");
  ExpectError(ParseGguf(Bytes(big.Build())), StatusCode::kDataLoss, {kGguf, "'bytes'", "overflow"});
  GgufBuilder neg;
  neg.AddTensor("neg", {~uint64_t{0}}, testing::kGgmlF32, "x");
  ExpectError(ParseGguf(Bytes(neg.Build())), StatusCode::kDataLoss, {kGguf, "'neg'"});
  GgufBuilder q;
  q.AddTensor("q", {48, 2}, testing::kGgmlQ8_0, std::string(102, '\0'));
  ExpectError(ParseGguf(Bytes(q.Build())), StatusCode::kDataLoss,
              {kGguf, "'q'", "multiple of the Q8_0 block size 32"});
}

TEST(GgufFile, BadOffsets) {
  GgufBuilder u;
  u.AddTensor("unaligned", {32}, testing::kGgmlF32, {}, 4);
  ExpectError(ParseGguf(Bytes(u.Build())), StatusCode::kDataLoss,
              {kGguf, "'unaligned'", "alignment 32"});
  GgufBuilder f;
  f.AddTensor("far", {32}, testing::kGgmlF32, {}, uint64_t{1} << 40);
  ExpectError(ParseGguf(Bytes(f.Build())), StatusCode::kDataLoss,
              {kGguf, "tensor 'far'", "beyond end of file"});
  GgufBuilder w;  // offset close to 2^64: begin + nbytes must not wrap around
  w.AddTensor("wrap", {32}, testing::kGgmlF32, {}, ~uint64_t{31});
  ExpectError(ParseGguf(Bytes(w.Build())), StatusCode::kDataLoss,
              {kGguf, "tensor 'wrap'", "beyond end of file"});
}

TEST(GgufFile, UnsupportedTensorTypesAreNamed) {
  GgufBuilder b;
  b.AddTensor("blk.0.attn_q.weight", {256, 2}, testing::kGgmlIQ2_XXS, std::string(132, '\0'));
  ExpectError(ParseGguf(Bytes(b.Build())), StatusCode::kUnimplemented,
              {"unsupported tensor type", "IQ2_XXS", "'blk.0.attn_q.weight'", kGguf});
  GgufBuilder u;
  u.AddTensor("t", {32}, 200, std::string(128, '\0'));
  ExpectError(ParseGguf(Bytes(u.Build())), StatusCode::kUnimplemented,
              {"unsupported tensor type", "200", "'t'", kGguf});
}

TEST(GgufFile, SupportedTensorTypes) {
  GgufBuilder b;
  b.AddTensor("f16", {32, 2}, testing::kGgmlF16);
  b.AddTensor("bf16", {32, 2}, testing::kGgmlBF16);
  b.AddTensor("q4", {64, 3}, testing::kGgmlQ4_0);
  const auto bytes = Bytes(b.Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->FindTensor("f16")->dtype, DType::kF16);
  EXPECT_EQ((*r)->FindTensor("bf16")->dtype, DType::kBF16);
  EXPECT_EQ((*r)->FindTensor("q4")->dtype, DType::kQ4_0);
  EXPECT_EQ((*r)->FindTensor("q4")->nbytes, 3u * 2 * 18);

  // The GGUF-only block types: ggml id -> DType, bytes at the block geometry.
  const struct {
    uint32_t id;
    DType dtype;
    uint64_t block_elems, block_bytes;
  } kBlockTypes[] = {{3, DType::kQ4_1, 32, 20},    {6, DType::kQ5_0, 32, 22},
                     {7, DType::kQ5_1, 32, 24},    {10, DType::kQ2_K, 256, 84},
                     {11, DType::kQ3_K, 256, 110}, {12, DType::kQ4_K, 256, 144},
                     {13, DType::kQ5_K, 256, 176}, {14, DType::kQ6_K, 256, 210},
                     {20, DType::kIQ4_NL, 32, 18}, {23, DType::kIQ4_XS, 256, 136}};
  for (const auto& t : kBlockTypes) {
    GgufBuilder k;
    k.AddTensor("w", {2 * t.block_elems, 3}, t.id, std::string(6 * t.block_bytes, '\x11'));
    const auto kb = Bytes(k.Build());
    auto kr = ParseGguf(kb);
    ASSERT_TRUE(kr.ok()) << t.id << ": " << kr.status().ToString();
    EXPECT_EQ((*kr)->FindTensor("w")->dtype, t.dtype);
    EXPECT_EQ((*kr)->FindTensor("w")->nbytes, 6 * t.block_bytes) << DTypeName(t.dtype);
  }
}

// Super-block types: a row that is not whole 256-element blocks, and data cut short, are
// errors naming the file and tensor.
TEST(GgufFile, SuperBlockRowsAndTruncationAreNamed) {
  GgufBuilder r;
  r.AddTensor("blk.0.ffn_down.weight", {384, 2}, testing::kGgmlQ4_K, std::string(288, '\0'));
  ExpectError(ParseGguf(Bytes(r.Build())), StatusCode::kDataLoss,
              {kGguf, "'blk.0.ffn_down.weight'", "multiple of the Q4_K block size 256"});
  GgufBuilder t;
  t.AddTensor("output.weight", {512, 4}, testing::kGgmlQ6_K);
  const std::string s = t.Build();
  ExpectError(ParseGguf(Bytes(s, s.size() - 7)), StatusCode::kDataLoss,
              {kGguf, "tensor 'output.weight'", "beyond end of file"});
}

TEST(GgufFile, Alignment) {
  GgufBuilder b;
  b.alignment = 64;
  b.AddU32("general.alignment", 64);
  b.AddTensor("a", {8}, testing::kGgmlF32);
  b.AddTensor("b", {8}, testing::kGgmlF32);
  const auto bytes = Bytes(b.Build());
  auto r = ParseGguf(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(((*r)->FindTensor("a")->data - bytes.data()) % 64, 0);
  EXPECT_EQ((*r)->FindTensor("b")->data - (*r)->FindTensor("a")->data, 64);

  for (uint32_t bad : {0u, 3u, 48u}) {
    GgufBuilder x;
    x.AddU32("general.alignment", bad);
    ExpectError(ParseGguf(Bytes(x.Build())), StatusCode::kDataLoss, {kGguf, "general.alignment"});
  }
  GgufBuilder s;
  s.AddString("general.alignment", "32");
  ExpectError(ParseGguf(Bytes(s.Build())), StatusCode::kDataLoss, {kGguf, "general.alignment"});
}

TEST(GgufFile, OpenMissingFile) {
  ExpectError(GgufFile::Open("/nonexistent/dir/x.gguf"), StatusCode::kNotFound, {"x.gguf"});
}

// ---------------------------------------------------------------------------- safetensors

SafetensorsBuilder SmallSafetensors() {
  SafetensorsBuilder b;
  b.Add("model.embed_tokens.weight", "F32", {4, 8});
  b.Add("model.norm.weight", "BF16", {8});
  b.Add("lm_head.weight", "F16", {4, 8});
  return b;
}

// Header JSON + data with the standard framing.
std::vector<uint8_t> St(const std::string& header, const std::string& data = std::string(64, 'x')) {
  return Bytes(SafetensorsBuilder::Assemble(header, data));
}

TEST(SafetensorsFile, ParsesValidFile) {
  const auto bytes = Bytes(SmallSafetensors().Build());
  auto r = ParseSt(bytes);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const SafetensorsFile& f = **r;
  EXPECT_EQ(f.name(), kSt);
  EXPECT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const TensorView* e = f.FindTensor("model.embed_tokens.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, DType::kF32);
  EXPECT_EQ(e->shape, (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(e->nbytes, 128u);
  EXPECT_EQ(f.FindTensor("model.norm.weight")->dtype, DType::kBF16);
  EXPECT_EQ(f.FindTensor("lm_head.weight")->dtype, DType::kF16);
  EXPECT_EQ(f.FindTensor("lm_head.weight")->nbytes, 64u);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
  // Data starts right after the header; tensors are laid out in insertion order.
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  EXPECT_EQ(e->data, bytes.data() + 8 + header_len);
}

TEST(SafetensorsFile, ZeroSizedAndScalarTensors) {
  auto r = ParseSt(St(R"({"empty":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},)"
                      R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->FindTensor("empty")->nbytes, 0u);
  EXPECT_EQ((*r)->FindTensor("scalar")->numel(), 1);
}

TEST(SafetensorsFile, EveryPrefixFails) {
  const std::string s = SmallSafetensors().Build();
  for (size_t n = 0; n < s.size(); ++n) {
    const auto bytes = Bytes(s, n);
    auto r = ParseSt(bytes);
    ASSERT_FALSE(r.ok()) << "prefix " << n << " of " << s.size() << " parsed";
    ASSERT_NE(r.status().message().find(kSt), std::string::npos) << r.status().message();
  }
}

TEST(SafetensorsFile, HeaderLength) {
  std::string s = SmallSafetensors().Build();
  PatchU64(&s, 0, s.size());  // one past what the file can hold
  ExpectError(ParseSt(Bytes(s)), StatusCode::kDataLoss, {kSt, "header length", "file size"});
  PatchU64(&s, 0, ~uint64_t{0});
  ExpectError(ParseSt(Bytes(s)), StatusCode::kDataLoss, {kSt, "header length"});
  ExpectError(ParseSt(Bytes("1234")), StatusCode::kDataLoss, {kSt, "truncated"});
}

TEST(SafetensorsFile, MalformedJson) {
  ExpectError(ParseSt(St(R"({"a": {"dtype": "F32", )")), StatusCode::kDataLoss, {kSt, "JSON"});
  ExpectError(ParseSt(St("[1, 2]")), StatusCode::kDataLoss, {kSt, "object"});
  ExpectError(ParseSt(St(std::string(4000, '[') + std::string(4000, ']'))), StatusCode::kDataLoss,
              {kSt});
  ExpectError(ParseSt(St(R"({"t": 5})")), StatusCode::kDataLoss, {kSt, "'t'"});
  ExpectError(ParseSt(St(R"({"__metadata__": {"k": 1}})")), StatusCode::kDataLoss,
              {kSt, "__metadata__", "'k'"});
  ExpectError(ParseSt(St(R"({"__metadata__": []})")), StatusCode::kDataLoss, {kSt, "__metadata__"});
}

TEST(SafetensorsFile, BadTensorEntries) {
  struct Case {
    const char* header;
    StatusCode code;
    const char* needle;
  };
  const Case cases[] = {
      {R"({"w":{"shape":[2],"data_offsets":[0,8]}})", StatusCode::kDataLoss, "dtype"},
      {R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", StatusCode::kDataLoss, "dtype"},
      {R"({"w":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})", StatusCode::kUnimplemented,
       "'I64'"},
      {R"({"w":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", StatusCode::kUnimplemented,
       "'F8_E4M3'"},
      {R"({"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,2]}})", StatusCode::kUnimplemented,
       "'Q9'"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", StatusCode::kDataLoss, "shape"},
      {R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", StatusCode::kDataLoss,
       "shape"},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", StatusCode::kDataLoss,
       "shape"},
      {R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", StatusCode::kDataLoss,
       "shape"},
      {R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})",
       StatusCode::kDataLoss, "overflow"},
      {R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}})",
       StatusCode::kDataLoss, "overflow"},
      {R"({"w":{"dtype":"F32","shape":[2]}})", StatusCode::kDataLoss, "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", StatusCode::kDataLoss,
       "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,16]}})", StatusCode::kDataLoss,
       "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", StatusCode::kDataLoss,
       "data_offsets"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[16,8]}})", StatusCode::kDataLoss,
       "begin > end"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[64,72]}})", StatusCode::kDataLoss,
       "beyond end of file"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})",
       StatusCode::kDataLoss, "beyond end of file"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", StatusCode::kDataLoss,
       "need 8"},
      {R"({"w":{"dtype":"F16","shape":[3,2],"data_offsets":[0,8]}})", StatusCode::kDataLoss,
       "need 12"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.header);
    ExpectError(ParseSt(St(c.header)), c.code, {kSt, "'w'", c.needle});
  }
}

TEST(SafetensorsFile, OpenMissingFile) {
  ExpectError(SafetensorsFile::Open("/nonexistent/model.safetensors"), StatusCode::kNotFound,
              {"model.safetensors"});
}

}  // namespace
}  // namespace pagellm
