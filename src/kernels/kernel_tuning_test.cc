#include "kernels/kernel_tuning.h"

#include <gtest/gtest.h>

namespace pagellm {
namespace {

TEST(KernelTuning, OverridesReplaceSingleValues) {
  const KernelTuning base = KernelTuningFor(CpuMicroarch::kZen5);
  auto t =
      ApplyKernelTuningOverrides(base, "quant_prefetch=16384,row_prefetch=0,quant_prefetch_l2=1");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->quant_prefetch_bytes, 16384);
  EXPECT_EQ(t->row_prefetch_bytes, 0);
  EXPECT_EQ(t->f16_prefetch_bytes, base.f16_prefetch_bytes);
  EXPECT_EQ(
      KernelTuningString(*t),
      "quant_prefetch=16384 quant_prefetch_l2=1 kquant_prefetch=" +
          std::to_string(base.kquant_prefetch_bytes) +
          " q8_0_prefetch=" + std::to_string(base.q8_0_prefetch_bytes) +
          " f16_prefetch=" + std::to_string(base.f16_prefetch_bytes) +
          " row_prefetch=0 attention_run_floats=" + std::to_string(base.attention_run_floats) +
          " idle_read_ahead=" + std::to_string(base.idle_read_ahead_bytes));
  auto ra = ApplyKernelTuningOverrides(base, "idle_read_ahead=131072");
  ASSERT_TRUE(ra.ok()) << ra.status().ToString();
  EXPECT_EQ(ra->idle_read_ahead_bytes, 131072);
  auto q8 = ApplyKernelTuningOverrides(base, "q8_0_prefetch=131072");
  ASSERT_TRUE(q8.ok()) << q8.status().ToString();
  EXPECT_EQ(q8->q8_0_prefetch_bytes, 131072);
  EXPECT_EQ(q8->quant_prefetch_bytes, base.quant_prefetch_bytes);
  auto kq = ApplyKernelTuningOverrides(base, "kquant_prefetch=0");
  ASSERT_TRUE(kq.ok()) << kq.status().ToString();
  EXPECT_EQ(kq->kquant_prefetch_bytes, 0);
  EXPECT_EQ(kq->quant_prefetch_bytes, base.quant_prefetch_bytes);
  auto run = ApplyKernelTuningOverrides(base, "attention_run_floats=4096");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->attention_run_floats, 4096);
  auto empty = ApplyKernelTuningOverrides(base, "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->quant_prefetch_bytes, base.quant_prefetch_bytes);
}

TEST(KernelTuning, RejectsMalformedOverrides) {
  const KernelTuning base;
  for (const char* bad :
       {"quant_prefetch", "quant_prefetch=", "quant_prefetch=100", "quant_prefetch=-64",
        "quant_prefetch=2097152", "prefetch=64", "f16_prefetch=64k", "quant_prefetch_l2=2",
        "quant_prefetch_l2=yes", "attention_run_floats=0", "attention_run_floats=2097152",
        "kquant_prefetch=32", "kquant_prefetch=-1", "idle_read_ahead=100"}) {
    auto t = ApplyKernelTuningOverrides(base, bad);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(KernelTuning, EveryMicroarchHasAValidRow) {
  for (CpuMicroarch m : {CpuMicroarch::kOther, CpuMicroarch::kZen4, CpuMicroarch::kZen5,
                         CpuMicroarch::kIntelAvx512}) {
    const KernelTuning t = KernelTuningFor(m);
    // The rows go through the same validation as an override (0 = no software prefetch).
    auto same = ApplyKernelTuningOverrides(
        KernelTuning{}, "quant_prefetch=" + std::to_string(t.quant_prefetch_bytes) +
                            ",quant_prefetch_l2=" + std::to_string(t.quant_prefetch_l2 ? 1 : 0) +
                            ",kquant_prefetch=" + std::to_string(t.kquant_prefetch_bytes) +
                            ",q8_0_prefetch=" + std::to_string(t.q8_0_prefetch_bytes) +
                            ",f16_prefetch=" + std::to_string(t.f16_prefetch_bytes) +
                            ",row_prefetch=" + std::to_string(t.row_prefetch_bytes) +
                            ",attention_run_floats=" + std::to_string(t.attention_run_floats) +
                            ",idle_read_ahead=" + std::to_string(t.idle_read_ahead_bytes));
    ASSERT_TRUE(same.ok()) << CpuMicroarchName(m) << ": " << same.status().ToString();
    EXPECT_EQ(KernelTuningString(*same), KernelTuningString(t)) << CpuMicroarchName(m);
    EXPECT_GT(t.quant_prefetch_bytes, 0) << CpuMicroarchName(m);
    EXPECT_GT(t.row_prefetch_bytes, 0) << CpuMicroarchName(m);
  }
  // Zen 4 and Zen 5 stream 16-bit weights on the hardware prefetchers alone, Zen 5 Q8_0 groups
  // too (kernel_tuning.cc); the other rows keep the 64 KiB distances.
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen4).f16_prefetch_bytes, 0);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen5).f16_prefetch_bytes, 0);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen5).q8_0_prefetch_bytes, 0);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen4).q8_0_prefetch_bytes, 65536);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kIntelAvx512).f16_prefetch_bytes, 65536);
  // Idle threads read ahead into the next decode matrix on Zen 5 only (measured there).
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen5).idle_read_ahead_bytes, 262144);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen4).idle_read_ahead_bytes, 0);
  // Zen 5's K-quant super-blocks 16 KiB ahead, the other rows at the Q4_0 distance.
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen5).kquant_prefetch_bytes, 16384);
  EXPECT_EQ(KernelTuningFor(CpuMicroarch::kZen4).kquant_prefetch_bytes,
            KernelTuningFor(CpuMicroarch::kZen4).quant_prefetch_bytes);
  EXPECT_TRUE(KernelTuningFor(CpuMicroarch::kZen4).quant_prefetch_l2);
  EXPECT_FALSE(KernelTuningFor(CpuMicroarch::kZen5).quant_prefetch_l2);
  EXPECT_NE(KernelTuningString(KernelTuningFor(CpuMicroarch::kZen4)),
            KernelTuningString(KernelTuningFor(CpuMicroarch::kZen5)));
}

}  // namespace
}  // namespace pagellm
