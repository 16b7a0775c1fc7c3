#include <istream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "cli/commands.h"
#include "cli/translator.h"
#include "model/search.h"

namespace deepnet::cli {

int RunTranslate(const TranslateCommand& command, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  auto translator = Translator::Open(command.checkpoint, command.device);
  if (!translator.ok()) {
    err << "deepnet translate: " << translator.status().message() << "\n";
    return kExitBadInput;
  }
  model::SearchOptions options;
  options.beam_size = command.beam_size;
  options.length_penalty = command.length_penalty;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto result = (*translator)->Translate({line}, command.to_lang, options);
    if (!result.ok()) {
      err << "deepnet translate: " << result.status().message() << "\n";
      return absl::IsInvalidArgument(result.status()) ? kExitBadInput : kExitFailure;
    }
    out << result->front() << "\n" << std::flush;
  }
  return kExitOk;
}

}  // namespace deepnet::cli
