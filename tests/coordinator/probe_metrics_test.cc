// Probe and per-layer diagnostics on /metrics: summaries over layers (one series per statistic,
// never per layer), the latest of a report's points, and MetricPoint fields 14-23 through the
// proto conversion.
#include "coordinator/core/probe_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/grpc/proto_convert.h"

namespace deepnet::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

MetricPoint Point(int64_t step) {
  MetricPoint p;
  p.step = step;
  p.loss = 2.0;
  return p;
}

MetricPoint ProbedPoint(int64_t step) {
  MetricPoint p = Point(step);
  p.probe_step = step - 1;
  p.probe_update_norm = 0.5;
  p.f0_norm = 4.0;
  p.update_norm_relative = 0.125;
  p.logits_update_norm = 3.0;
  p.logits_f0_norm = 12.0;
  p.logits_update_norm_relative = 0.25;
  p.diagnostics_step = step;
  p.ln_input_norm = {1.5, 9.5, 4.0, 3.5, 8.0};
  p.layer_grad_norm = {0.01, 0.2, 0.05, 0.04, 0.15};
  return p;
}

TEST(ProbeMetricsTest, ExportsSummariesOverLayersAndKeepsTheLastValues) {
  auto metrics = CoordinatorMetrics::Create("");
  ASSERT_TRUE(metrics.ok());
  TrainingSample sample;
  sample.step = 10;
  SetProbeAndDiagnostics({Point(8), ProbedPoint(10)}, &sample);
  ASSERT_TRUE(sample.probe.has_value());
  ASSERT_TRUE(sample.diagnostics.has_value());
  (*metrics)->SetJobTraining("j-1", sample);
  std::string text = (*metrics)->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_job_probe_step{job=\"j-1\"} 9"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_f0_norm{job=\"j-1\"} 4"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_update_norm_relative{job=\"j-1\"} 0.125"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_logits_update_norm{job=\"j-1\"} 3"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_logits_update_norm_relative{job=\"j-1\"} 0.25"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_diagnostics_step{job=\"j-1\"} 10"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_ln_input_norm{job=\"j-1\",stat=\"min\"} 1.5"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_ln_input_norm{job=\"j-1\",stat=\"p50\"} 3.5"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_ln_input_norm{job=\"j-1\",stat=\"p90\"} 8"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_ln_input_norm{job=\"j-1\",stat=\"max\"} 9.5"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_ln_input_norm{job=\"j-1\",stat=\"mean\"} 4"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_layer_grad_norm{job=\"j-1\",stat=\"max\"} 0.2"));
  EXPECT_THAT(text, Not(HasSubstr("layer=")));  // Never a series per layer.

  // A report without a probe keeps the last probe's gauges.
  TrainingSample later;
  later.step = 11;
  SetProbeAndDiagnostics({Point(11)}, &later);
  EXPECT_FALSE(later.probe.has_value());
  EXPECT_FALSE(later.diagnostics.has_value());
  (*metrics)->SetJobTraining("j-1", later);
  text = (*metrics)->Serialize();
  EXPECT_THAT(text, HasSubstr("deepnet_job_step{job=\"j-1\"} 11"));
  EXPECT_THAT(text, HasSubstr("deepnet_job_update_norm_relative{job=\"j-1\"} 0.125"));

  (*metrics)->RemoveJob("j-1");
  EXPECT_THAT((*metrics)->Serialize(), Not(HasSubstr("j-1")));
}

TEST(ProbeMetricsTest, TheLatestProbeOfAReportWins) {
  MetricPoint a = ProbedPoint(5), b = ProbedPoint(9);
  b.update_norm_relative = 0.5;
  TrainingSample sample;
  SetProbeAndDiagnostics({a, b, Point(10)}, &sample);
  ASSERT_TRUE(sample.probe.has_value());
  EXPECT_EQ(sample.probe->step, 8);
  EXPECT_EQ(sample.probe->update_norm_relative, 0.5);
  EXPECT_EQ(sample.diagnostics->step, 9);
}

TEST(ProbeMetricsTest, MetricPointRoundTripsProbeAndDiagnostics) {
  const MetricPoint p = ProbedPoint(10);
  const v1::MetricPoint proto = ToProto(p);
  EXPECT_EQ(proto.probe_step(), 9);
  EXPECT_EQ(proto.ln_input_norm().p90(), 8.0);
  const MetricPoint back = FromProto(proto);
  EXPECT_EQ(back.probe_step, 9);
  EXPECT_EQ(back.probe_update_norm, 0.5);
  EXPECT_EQ(back.f0_norm, 4.0);
  EXPECT_EQ(back.update_norm_relative, 0.125);
  EXPECT_EQ(back.logits_update_norm, 3.0);
  EXPECT_EQ(back.logits_f0_norm, 12.0);
  EXPECT_EQ(back.logits_update_norm_relative, 0.25);
  EXPECT_EQ(back.diagnostics_step, 10);
  EXPECT_EQ(back.ln_input_norm.min, 1.5);
  EXPECT_EQ(back.ln_input_norm.max, 9.5);
  EXPECT_EQ(back.ln_input_norm.mean, 4.0);
  EXPECT_EQ(back.ln_input_norm.p50, 3.5);
  EXPECT_EQ(back.layer_grad_norm.p90, 0.15);
  // A point without them stays without.
  const MetricPoint none = FromProto(ToProto(Point(3)));
  EXPECT_EQ(none.probe_step, 0);
  EXPECT_EQ(none.diagnostics_step, 0);
}

}  // namespace
}  // namespace deepnet::coordinator
