#include "model/deepnorm.h"

#include <gtest/gtest.h>

#include <cmath>

namespace deepnet::model {
namespace {

TEST(DeepNormTest, EncoderDecoderScalingFollowsPaperFormulas) {
  for (auto [n, m] : {std::pair{6, 6}, {18, 18}, {100, 100}, {200, 100}, {12, 1}, {500, 500}}) {
    const ModelScaling s = ComputeScaling(NormVariant::kDeepNorm, n, m);
    ASSERT_TRUE(s.encoder && s.decoder);
    const double nm = std::pow(double(n), 4) * m;
    EXPECT_NEAR(s.encoder->alpha, 0.81 * std::pow(nm, 1.0 / 16), 1e-12) << n << "," << m;
    EXPECT_NEAR(s.encoder->beta, 0.87 * std::pow(nm, -1.0 / 16), 1e-12) << n << "," << m;
    EXPECT_NEAR(s.decoder->alpha, std::pow(3.0 * m, 0.25), 1e-12);
    EXPECT_NEAR(s.decoder->beta, std::pow(12.0 * m, -0.25), 1e-12);
  }
}

TEST(DeepNormTest, KnownValuesFor100L100L) {
  const ModelScaling s = ComputeScaling(NormVariant::kDeepNorm, 100, 100);
  // (N^4 M)^(1/16) = 100^(5/16) = 4.2170 -> alpha_e = 3.4158, beta_e = 0.2063.
  EXPECT_NEAR(s.encoder->alpha, 3.41580, 1e-4);
  EXPECT_NEAR(s.encoder->beta, 0.20631, 1e-4);
  EXPECT_NEAR(s.decoder->alpha, std::pow(300.0, 0.25), 1e-12);  // 4.1618
  EXPECT_NEAR(s.decoder->beta, std::pow(1200.0, -0.25), 1e-12);  // 0.1699
}

TEST(DeepNormTest, EncoderOnlyAndDecoderOnly) {
  const ModelScaling enc = ComputeScaling(NormVariant::kDeepNorm, 24, 0);
  ASSERT_TRUE(enc.encoder);
  EXPECT_FALSE(enc.decoder);
  EXPECT_NEAR(enc.encoder->alpha, std::pow(48.0, 0.25), 1e-12);
  EXPECT_NEAR(enc.encoder->beta, std::pow(192.0, -0.25), 1e-12);
  const ModelScaling dec = ComputeScaling(NormVariant::kDeepNorm, 0, 32);
  ASSERT_TRUE(dec.decoder);
  EXPECT_FALSE(dec.encoder);
  EXPECT_NEAR(dec.decoder->alpha, std::pow(64.0, 0.25), 1e-12);
  EXPECT_NEAR(dec.decoder->beta, std::pow(256.0, -0.25), 1e-12);
}

TEST(DeepNormTest, BaselinesUseUnitScaling) {
  for (NormVariant v : {NormVariant::kPostLn, NormVariant::kPreLn, NormVariant::kPostLnInit}) {
    const ModelScaling s = ComputeScaling(v, 18, 18);
    EXPECT_EQ(s.encoder->alpha, 1.0);
    EXPECT_EQ(s.encoder->beta, 1.0);
    EXPECT_EQ(s.decoder->alpha, 1.0);
    EXPECT_EQ(s.decoder->beta, 1.0);
  }
}

TEST(DeepNormTest, PreLnDeepNetUsesSqrtLog2N) {
  const ModelScaling s = ComputeScaling(NormVariant::kDeepNormPreLn, 12, 6);
  EXPECT_EQ(s.encoder->alpha, 1.0);
  EXPECT_NEAR(s.encoder->beta, std::sqrt(std::log(24.0)), 1e-12);
  EXPECT_NEAR(s.decoder->beta, std::sqrt(std::log(12.0)), 1e-12);
}

TEST(DeepNormTest, PostLnInitDivisorIsNMinusLPlusOne) {
  EXPECT_EQ(PostLnInitDivisor(0, 18), 18.0);   // l = 1
  EXPECT_EQ(PostLnInitDivisor(17, 18), 1.0);   // l = N
  EXPECT_EQ(PostLnInitDivisor(5, 6), 1.0);
  EXPECT_THROW(PostLnInitDivisor(6, 6), c10::Error);
}

TEST(DeepNormTest, RejectsEmptyModel) {
  EXPECT_THROW(ComputeScaling(NormVariant::kDeepNorm, 0, 0), c10::Error);
}

}  // namespace
}  // namespace deepnet::model
