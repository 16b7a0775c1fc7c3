#include "cli/prepare_command.h"

#include <cstdio>
#include <ostream>

#include "cli/commands.h"

namespace deepnet::cli {

int RunPrepare(const data::ShardBuildOptions& options, std::ostream& out, std::ostream& err) {
  auto summary = data::BuildShards(options);
  if (!summary.ok()) {
    err << "deepnet data prepare: " << summary.status().message() << "\n";
    return absl::IsInvalidArgument(summary.status()) || absl::IsNotFound(summary.status())
               ? kExitBadInput
               : kExitFailure;
  }
  char line[256];
  out << "[prepare] SentencePiece " << options.model_type << ", vocabulary " << summary->vocab_size
      << ", " << summary->languages.size() << " language tags, fingerprint "
      << summary->fingerprint << "\n";
  std::snprintf(line, sizeof(line), "%-8s %-12s %10s %12s %12s %8s\n", "split", "direction",
                "pairs", "src tokens", "tgt tokens", "dropped");
  out << line;
  for (const auto& s : summary->shards) {
    std::snprintf(line, sizeof(line), "%-8s %-12s %10lld %12lld %12lld %8lld\n", s.split.c_str(),
                  (s.src_lang + "-" + s.tgt_lang).c_str(), static_cast<long long>(s.pairs),
                  static_cast<long long>(s.src_tokens), static_cast<long long>(s.tgt_tokens),
                  static_cast<long long>(s.dropped));
    out << line;
  }
  std::snprintf(line, sizeof(line),
                "[prepare] SentencePiece training %.1f s; tokenized %lld sentences in %.1f s "
                "(%.0f sentences/s); written to %s\n",
                summary->train_seconds, static_cast<long long>(summary->tokenized_sentences),
                summary->tokenize_seconds, summary->sentences_per_second,
                options.output_dir.c_str());
  out << line;
  return kExitOk;
}

}  // namespace deepnet::cli
