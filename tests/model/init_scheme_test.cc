// model.init: the measured standard deviation of every weight kind under both schemes against
// the closed-form values of docs/MODEL.md, their ratio, and slice-equals-whole.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <ostream>
#include <string>

#include "model/initialization.h"

namespace deepnet::model {
namespace {

const char* const kKinds[] = {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"};

std::string KindOf(const std::string& name) {
  for (const char* kind : kKinds) {
    if (name.find(std::string(kind) + ".") != std::string::npos) return kind;
  }
  return "";
}

bool BetaScaled(const std::string& kind) { return kind != "q_proj" && kind != "k_proj"; }

DeepNetConfig Shape(int64_t enc, int64_t dec, int64_t d, int64_t ffn, InitScheme init) {
  return DeepNetConfig()
      .encoder_layers(enc)
      .decoder_layers(dec)
      .d_model(d)
      .heads(2)
      .ffn_dim(ffn)
      .vocab_size(40)
      .max_positions(32)
      .init(init);
}

// The formulas of docs/MODEL.md, written out independently of model/initialization.cc.
double ExpectedWeightStd(const std::string& kind, int64_t d, int64_t ffn, double beta,
                         InitScheme init) {
  const double fan_out = kind == "fc1" ? ffn : d;
  const double fan_in = kind == "fc2" ? ffn : d;
  const double gain = BetaScaled(kind) ? beta : 1.0;
  if (init == InitScheme::kPaper) return gain * std::sqrt(2.0 / (fan_in + fan_out));
  return gain / std::sqrt(3.0 * fan_in);  // U(+-1/sqrt(fan_in)) has std 1/sqrt(3 fan_in).
}

// Root mean square of all weights (or biases) of one kind in one stack, pooled over layers.
std::map<std::string, double> PooledStd(DeepNetImpl& model, const std::string& stack,
                                        const std::string& suffix) {
  std::map<std::string, std::pair<double, int64_t>> sums;
  for (const auto& p : model.named_parameters()) {
    const std::string& name = p.key();
    const std::string kind = KindOf(name);
    if (kind.empty() || name.rfind(stack + ".", 0) != 0) continue;
    if (name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    auto& [sum, count] = sums[kind];
    sum += p.value().to(torch::kDouble).pow(2).sum().item<double>();
    count += p.value().numel();
  }
  std::map<std::string, double> out;
  for (const auto& [kind, s] : sums) out[kind] = std::sqrt(s.first / static_cast<double>(s.second));
  return out;
}

struct Case {
  int64_t enc, dec, d, ffn;
  NormVariant norm;
};

// How gtest prints a Case (CTest's test names carry it): without it gtest printed the struct's
// bytes, padding included, so the names changed from one listing to the next.
std::string CaseName(const Case& c) {
  return "L" + std::to_string(c.enc) + "_" + std::to_string(c.dec) + "_d" + std::to_string(c.d) +
         "_ffn" + std::to_string(c.ffn) + "_" + std::string(ToString(c.norm));
}
void PrintTo(const Case& c, std::ostream* os) { *os << CaseName(c); }

class InitSchemeTest : public ::testing::TestWithParam<Case> {};

TEST_P(InitSchemeTest, MeasuredWeightStdMatchesTheFormulaUnderBothSchemes) {
  const Case c = GetParam();
  for (InitScheme init : {InitScheme::kPaper, InitScheme::kScaledDefault}) {
    const DeepNetConfig config = Shape(c.enc, c.dec, c.d, c.ffn, init).norm(c.norm);
    DeepNet model(config);
    InitializeParameters(*model, 17);
    const ModelScaling s = model->scaling();
    for (const char* stack : {"encoder", "decoder"}) {
      const double beta = std::string(stack) == "encoder" ? s.encoder->beta : s.decoder->beta;
      const auto measured = PooledStd(*model, stack, ".weight");
      ASSERT_EQ(measured.size(), 6u) << stack;
      for (const auto& [kind, value] : measured) {
        const double expected = ExpectedWeightStd(kind, c.d, c.ffn, beta, init);
        // Every kind pools at least 2 x 64 x 64 samples: sampling error well under 2 %.
        EXPECT_NEAR(value / expected, 1.0, 0.03)
            << ToString(init) << " " << stack << " " << kind << " d=" << c.d << " L=" << c.enc;
      }
    }
  }
}

TEST_P(InitSchemeTest, PaperOverScaledDefaultRatioIsTheClosedForm) {
  const Case c = GetParam();
  std::map<InitScheme, std::map<std::string, double>> measured;
  for (InitScheme init : {InitScheme::kPaper, InitScheme::kScaledDefault}) {
    DeepNet model(Shape(c.enc, c.dec, c.d, c.ffn, init).norm(c.norm));
    InitializeParameters(*model, 23);
    measured[init] = PooledStd(*model, "decoder", ".weight");
  }
  const double d = c.d, f = c.ffn;
  // beta cancels: the ratio depends on the matrix shape only.
  const std::map<std::string, double> expected = {
      {"q_proj", std::sqrt(3.0)},          {"k_proj", std::sqrt(3.0)},
      {"v_proj", std::sqrt(3.0)},          {"out_proj", std::sqrt(3.0)},
      {"fc1", std::sqrt(6 * d / (d + f))}, {"fc2", std::sqrt(6 * f / (d + f))}};
  for (const auto& [kind, ratio] : expected) {
    const double got =
        measured[InitScheme::kPaper][kind] / measured[InitScheme::kScaledDefault][kind];
    EXPECT_NEAR(got / ratio, 1.0, 0.04) << kind << " d=" << c.d << " ffn=" << c.ffn;
    std::printf(
        "ratio paper/scaled_default d=%lld ffn=%lld L=%lld %-8s measured %.4f formula %.4f\n",
        static_cast<long long>(c.d), static_cast<long long>(c.ffn), static_cast<long long>(c.enc),
        kind.c_str(), got, ratio);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, InitSchemeTest,
                         ::testing::Values(Case{2, 2, 128, 256, NormVariant::kDeepNorm},
                                           Case{1, 1, 512, 2048, NormVariant::kDeepNorm},
                                           Case{18, 18, 64, 128, NormVariant::kDeepNorm},
                                           Case{50, 50, 64, 128, NormVariant::kDeepNorm},
                                           Case{3, 3, 64, 128, NormVariant::kPostLn},
                                           Case{4, 4, 64, 128, NormVariant::kDeepNormPreLn}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return CaseName(info.param);
                         });

TEST(InitSchemeBiasTest, ScaledDefaultBiasesFollowNnLinearTimesBeta) {
  const DeepNetConfig config = Shape(20, 20, 64, 128, InitScheme::kScaledDefault);
  DeepNet model(config);
  InitializeParameters(*model, 29);
  const double beta = model->scaling().decoder->beta;
  const auto measured = PooledStd(*model, "decoder", ".bias");
  for (const auto& [kind, value] : measured) {
    const double fan_in = kind == "fc2" ? 128.0 : 64.0;
    const double expected = (BetaScaled(kind) ? beta : 1.0) / std::sqrt(3.0 * fan_in);
    EXPECT_NEAR(value / expected, 1.0, 0.08) << kind;  // >= 20 x 64 samples per kind
  }
  // Layer norms stay 1/0 and the padding row zero under either scheme.
  for (const auto& p : model->named_parameters()) {
    if (p.key().find("layer_norm.weight") != std::string::npos) {
      EXPECT_TRUE(p.value().eq(1).all().item<bool>()) << p.key();
    } else if (p.key().find("layer_norm.bias") != std::string::npos) {
      EXPECT_TRUE(p.value().eq(0).all().item<bool>()) << p.key();
    }
  }
  EXPECT_TRUE(
      model->named_parameters()["embed_tokens.weight"][config.pad_id()].eq(0).all().item<bool>());
}

TEST(InitSchemeBiasTest, ScaledDefaultWeightsAreUniformWithinTheBound) {
  const DeepNetConfig config = Shape(2, 2, 64, 128, InitScheme::kScaledDefault);
  DeepNet model(config);
  InitializeParameters(*model, 31);
  const double beta = model->scaling().encoder->beta;
  auto w = model->named_parameters()["encoder.layers.1.fc2.weight"];
  EXPECT_LE(w.abs().max().item<double>(), beta / std::sqrt(128.0) + 1e-7);
  EXPECT_GT(w.abs().max().item<double>(), 0.95 * beta / std::sqrt(128.0));
}

TEST(InitSchemeBiasTest, PostLnInitDividesWeightsUnderScaledDefaultToo) {
  const DeepNetConfig config =
      Shape(4, 2, 128, 256, InitScheme::kScaledDefault).norm(NormVariant::kPostLnInit);
  DeepNet model(config);
  InitializeParameters(*model, 37);
  auto params = model->named_parameters();
  for (int layer = 0; layer < 4; ++layer) {
    auto w = params["encoder.layers." + std::to_string(layer) + ".fc1.weight"];
    const double k = 4 - layer;
    EXPECT_NEAR(w.std().item<double>() * k * std::sqrt(3.0 * 128), 1.0, 0.03) << layer;
  }
}

TEST(InitSchemeBiasTest, RuleStdAgreesWithTheFormulaForEveryMatrix) {
  for (InitScheme init : {InitScheme::kPaper, InitScheme::kScaledDefault}) {
    const DeepNetConfig config = Shape(6, 6, 64, 128, init);
    const ModelScaling s = ComputeScaling(config.norm(), 6, 6);
    DeepNet model(config);
    for (const auto& p : model->named_parameters()) {
      const std::string kind = KindOf(p.key());
      if (kind.empty() || p.value().dim() != 2) continue;
      const double beta = p.key().rfind("encoder.", 0) == 0 ? s.encoder->beta : s.decoder->beta;
      const ParameterInit rule = InitRuleFor(p.key(), config);
      EXPECT_NEAR(InitStd(rule, p.value().size(0), p.value().size(1), 64),
                  ExpectedWeightStd(kind, 64, 128, beta, init), 1e-12)
          << p.key();
    }
  }
}

TEST(InitSchemeSliceTest, EverySliceGetsTheWholeModelsValuesUnderBothSchemes) {
  for (InitScheme init : {InitScheme::kPaper, InitScheme::kScaledDefault}) {
    for (PositionKind positions : {PositionKind::kSinusoidal, PositionKind::kLearned}) {
      const DeepNetConfig config = Shape(3, 2, 16, 32, init).positions(positions);
      DeepNet whole(config);
      InitializeParameters(*whole, 41);
      auto reference = whole->named_parameters();
      for (int64_t cut = 1; cut < 5; ++cut) {
        for (bool first : {true, false}) {
          ModelSlice s;
          const int64_t begin = first ? 0 : cut, end = first ? cut : 5;
          s.encoder = {std::min<int64_t>(begin, 3), std::min<int64_t>(end, 3)};
          s.decoder = {std::max<int64_t>(begin - 3, 0), std::max<int64_t>(end - 3, 0)};
          DeepNet part(config, s);
          InitializeParameters(*part, 41);
          for (const auto& p : part->named_parameters()) {
            ASSERT_TRUE(reference.contains(p.key())) << p.key();
            EXPECT_TRUE(torch::equal(p.value(), reference[p.key()]))
                << ToString(init) << " " << s.ToString() << " " << p.key();
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepnet::model
