#include "model/pipeline_stage.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace pagellm {
namespace {

// vLLM's get_pp_indices: the remainder goes to the stages before the last, counted back from
// the second-to-last.
TEST(PipelineStage, PartitionsAsVllm) {
  EXPECT_EQ(*PartitionLayers(32, 4, {}), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(*PartitionLayers(5, 2, {}), (std::vector<int>{3, 2}));
  EXPECT_EQ(*PartitionLayers(5, 4, {}), (std::vector<int>{1, 1, 2, 1}));
  EXPECT_EQ(*PartitionLayers(7, 4, {}), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(*PartitionLayers(3, 1, {}), (std::vector<int>{3}));
  EXPECT_EQ(*PartitionLayers(5, 2, {1, 4}), (std::vector<int>{1, 4}));
  EXPECT_EQ(PartitionLayers(2, 3, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers(5, 2, {2, 2}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers(5, 3, {2, 3}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers(5, 2, {5, 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PartitionLayers(5, 0, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PipelineStage, StagesAndPartitionText) {
  const std::vector<int> p = {1, 1, 2, 1};
  const StageLayout l = StageOf(p, 2);
  EXPECT_EQ(l.layer_begin, 2);
  EXPECT_EQ(l.layer_end, 4);
  EXPECT_EQ(l.num_layers(), 2);
  EXPECT_FALSE(l.first());
  EXPECT_FALSE(l.last());
  EXPECT_TRUE(StageOf(p, 0).first());
  EXPECT_TRUE(StageOf(p, 3).last());
  EXPECT_EQ(*ParseLayerPartition("8,8"), (std::vector<int>{8, 8}));
  EXPECT_TRUE(ParseLayerPartition("")->empty());
  EXPECT_FALSE(ParseLayerPartition("8,,8").ok());
  EXPECT_FALSE(ParseLayerPartition("8,x").ok());
  EXPECT_FALSE(ParseLayerPartition("-1").ok());
  ::setenv("PAGELLM_PP_LAYER_PARTITION", "2,3", 1);
  EXPECT_EQ(*LayerPartitionFromEnvironment(), (std::vector<int>{2, 3}));
  ::setenv("PAGELLM_PP_LAYER_PARTITION", "2;3", 1);
  auto bad = LayerPartitionFromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("PAGELLM_PP_LAYER_PARTITION"), std::string::npos)
      << bad.status().message();
  ::unsetenv("PAGELLM_PP_LAYER_PARTITION");
  ::setenv("VLLM_PP_LAYER_PARTITION", "4,1", 1);
  EXPECT_EQ(*LayerPartitionFromEnvironment(), (std::vector<int>{4, 1}));
  ::unsetenv("VLLM_PP_LAYER_PARTITION");
  EXPECT_TRUE(LayerPartitionFromEnvironment()->empty());
}

}  // namespace
}  // namespace pagellm
