#pragma once

#include <iosfwd>

#include "data/shard_builder.h"

namespace deepnet::cli {

/// `deepnet data prepare`: trains the shared SentencePiece model (temperature-sampled over
/// languages, `<2xx>` tags as user-defined symbols) on a corpus folder's train split and writes
/// binarised shards for every split and direction, plus shards.json. Prints a summary with
/// tokenization throughput. Exit codes as in commands.h.
int RunPrepare(const data::ShardBuildOptions& options, std::ostream& out, std::ostream& err);

}  // namespace deepnet::cli
