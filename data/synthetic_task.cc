#include "data/synthetic_task.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "data/splitmix64.h"

namespace deepnet::data {
namespace {

// 200 common English words, lowercase ASCII. Changing this list changes every generated corpus.
constexpr const char* kWords[] = {
    "the",    "be",    "to",      "of",      "and",   "a",      "in",     "that",   "have",
    "it",     "for",   "not",     "on",      "with",  "he",     "as",     "you",    "do",
    "at",     "this",  "but",     "his",     "by",    "from",   "they",   "we",     "say",
    "her",    "she",   "or",      "an",      "will",  "my",     "one",    "all",    "would",
    "there",  "their", "what",    "so",      "up",    "out",    "if",     "about",  "who",
    "get",    "which", "go",      "me",      "when",  "make",   "can",    "like",   "time",
    "no",     "just",  "him",     "know",    "take",  "people", "into",   "year",   "your",
    "good",   "some",  "could",   "them",    "see",   "other",  "than",   "then",   "now",
    "look",   "only",  "come",    "its",     "over",  "think",  "also",   "back",   "after",
    "use",    "two",   "how",     "our",     "work",  "first",  "well",   "way",    "even",
    "new",    "want",  "because", "any",     "these", "give",   "day",    "most",   "us",
    "is",     "was",   "are",     "had",     "has",   "been",   "were",   "said",   "did",
    "many",   "more",  "very",    "much",    "where", "here",   "long",   "little", "great",
    "old",    "small", "large",   "big",     "high",  "low",    "right",  "left",   "same",
    "house",  "world", "school",  "water",   "food",  "city",   "tree",   "river",  "stone",
    "light",  "night", "morning", "evening", "book",  "letter", "word",   "name",   "friend",
    "family", "child", "man",     "woman",   "dog",   "cat",    "bird",   "horse",  "fish",
    "sun",    "moon",  "star",    "sea",     "road",  "door",   "window", "table",  "chair",
    "bread",  "milk",  "tea",     "red",     "blue",  "green",  "white",  "black",  "happy",
    "quick",  "slow",  "warm",    "cold",    "early", "late",   "open",   "close",  "read",
    "write",  "walk",  "run",     "sing",    "play",  "eat",    "drink",  "sleep",  "find",
    "keep",   "help",  "ask",     "tell",    "call",  "leave",  "bring",  "begin",  "show",
    "hear",   "live",
};
constexpr size_t kNumWords = std::size(kWords);
static_assert(kNumWords == 200, "the generator's word list has 200 entries");

constexpr const char* kLanguages[] = {"rev", "cap", "gr", "pig", "cp"};

bool IsKnownLanguage(absl::string_view lang) {
  return std::find(std::begin(kLanguages), std::end(kLanguages), lang) != std::end(kLanguages);
}

std::vector<std::string> SplitWords(absl::string_view text) {
  return absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
}

// Words in reverse order, joined by single spaces.
std::string Reverse(absl::string_view english) {
  std::vector<std::string> words = SplitWords(english);
  std::reverse(words.begin(), words.end());
  return absl::StrJoin(words, " ");
}

// Upper-cases the first ASCII letter of every whitespace-separated word; spacing is kept.
std::string Capitalise(absl::string_view english) {
  std::string out(english);
  bool word_start = true;
  for (char& c : out) {
    const bool space = absl::ascii_isspace(static_cast<unsigned char>(c));
    if (word_start && !space) c = absl::ascii_toupper(static_cast<unsigned char>(c));
    word_start = space;
  }
  return out;
}

// One Greek letter per Latin letter, chosen by sound or shape so the map is one-to-one:
// c -> lunate sigma (looks like c), v -> digamma (once /w/), the rest by sound.
constexpr const char* kGreekLower[26] = {"α", "β", "ϲ", "δ", "ε", "φ", "γ", "η", "ι",
                                         "ξ", "κ", "λ", "μ", "ν", "ο", "π", "θ", "ρ",
                                         "σ", "τ", "υ", "ϝ", "ω", "χ", "ψ", "ζ"};
constexpr const char* kGreekUpper[26] = {"Α", "Β", "Ϲ", "Δ", "Ε", "Φ", "Γ", "Η", "Ι",
                                         "Ξ", "Κ", "Λ", "Μ", "Ν", "Ο", "Π", "Θ", "Ρ",
                                         "Σ", "Τ", "Υ", "Ϝ", "Ω", "Χ", "Ψ", "Ζ"};

// ASCII letters become Greek letters (case kept); every other byte is copied.
std::string ToGreek(absl::string_view english) {
  std::string out;
  out.reserve(english.size() * 2);
  for (char c : english) {
    if (c >= 'a' && c <= 'z') {
      out += kGreekLower[c - 'a'];
    } else if (c >= 'A' && c <= 'Z') {
      out += kGreekUpper[c - 'A'];
    } else {
      out.push_back(c);
    }
  }
  return out;
}

bool IsVowel(char c) {
  switch (absl::ascii_tolower(static_cast<unsigned char>(c))) {
    case 'a':
    case 'e':
    case 'i':
    case 'o':
    case 'u':
      return true;
    default:
      return false;
  }
}

// Pig latin: a word starting with a vowel gets "way"; otherwise its leading consonants move
// to the end, followed by "ay" ("string" -> "ingstray"; "my", with no vowel, -> "myay").
std::string PigLatinWord(absl::string_view word) {
  if (word.empty() || IsVowel(word[0])) return absl::StrCat(word, "way");
  size_t split = 0;
  while (split < word.size() && !IsVowel(word[split])) ++split;
  if (split == word.size()) return absl::StrCat(word, "ay");
  return absl::StrCat(word.substr(split), word.substr(0, split), "ay");
}

std::string PigLatin(absl::string_view english) {
  std::vector<std::string> words = SplitWords(english);
  for (std::string& word : words) word = PigLatinWord(word);
  return absl::StrJoin(words, " ");
}

uint64_t Fnv1a64(absl::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::vector<std::string> SyntheticLanguages() {
  return std::vector<std::string>(std::begin(kLanguages), std::end(kLanguages));
}

std::string ApplySyntheticLanguage(const std::string& lang, const std::string& english) {
  if (lang == "rev") return Reverse(english);
  if (lang == "cap") return Capitalise(english);
  if (lang == "gr") return ToGreek(english);
  if (lang == "pig") return PigLatin(english);
  // "cp" is the identity. An unknown language is copied too: this function validates
  // nothing; the job schema (job::ValidateSyntheticData) rejects unknown languages.
  return english;
}

std::vector<ParallelExample> GenerateSyntheticCorpus(const SyntheticTaskOptions& options) {
  std::vector<std::string> languages;
  for (const std::string& lang : options.languages) {
    if (IsKnownLanguage(lang)) languages.push_back(lang);  // Unknown ones are skipped.
  }
  if (options.languages.empty()) languages = SyntheticLanguages();
  const int64_t pairs = std::max<int64_t>(options.pairs_per_language, 0);
  const int64_t min_words = std::max<int64_t>(options.min_words, 1);
  const int64_t max_words = std::max(options.max_words, min_words);
  const auto span = static_cast<uint64_t>(max_words - min_words) + 1;

  // One generator per language, seeded from (seed, language name): a language's sentences do
  // not depend on which other languages are selected or in what order.
  std::vector<SplitMix64> rngs;
  rngs.reserve(languages.size());
  for (const std::string& lang : languages) {
    rngs.emplace_back(SplitMix64::MixSeeds(options.seed, Fnv1a64(lang)));
  }

  std::vector<ParallelExample> corpus;
  corpus.reserve(static_cast<size_t>(pairs) * languages.size());
  // Interleaved (pair i of every language, then pair i + 1) so a prefix of the corpus covers
  // every language.
  for (int64_t i = 0; i < pairs; ++i) {
    for (size_t l = 0; l < languages.size(); ++l) {
      SplitMix64& rng = rngs[l];
      const int64_t length = min_words + static_cast<int64_t>(rng.UniformBelow(span));
      std::string english;
      for (int64_t w = 0; w < length; ++w) {
        if (w > 0) english.push_back(' ');
        english += kWords[rng.UniformBelow(kNumWords)];
      }
      std::string target = ApplySyntheticLanguage(languages[l], english);
      corpus.push_back({"en", languages[l], std::move(english), std::move(target)});
    }
  }
  return corpus;
}

}  // namespace deepnet::data
